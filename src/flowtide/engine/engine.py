"""The engine: runs flows on asyncio, many runs at once, against a store and a clock (see
``docs/engine.md``).

A run that has only parked and waiting tokens left is let go (nothing of it stays in memory, its
lease is given back); a request, the sweeper or :meth:`Engine.resume` rebuilds it from the
store, in any engine on the same store (see :mod:`flowtide.engine.worker.leases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
from flowtide.clock import Clock
from flowtide.engine.errors import EngineError
from flowtide.engine.events import Hook
from flowtide.engine.flows.catalog import FlowCatalog
from flowtide.engine.flows.code import EngineCode, FlowCode
from flowtide.engine.flows.contracts import OutputContracts
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.handles import RunHandle, SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.redaction import Redact
from flowtide.engine.requests._waiters import RunWaiters
from flowtide.engine.requests.inbox import Signaller
from flowtide.engine.requests.waiting import ResultWaiting
from flowtide.engine.result import RunResult
from flowtide.engine.run._commit import commit_step
from flowtide.engine.run.children import ChildRuns
from flowtide.engine.run.creation import RunCreation
from flowtide.engine.state.limits import DEFAULT_MAX_VALUE_BYTES, check_signal
from flowtide.engine.timing.deadlines import run_deadline
from flowtide.engine.timing.explain import Explanation, explain_stored, explain_stored_run
from flowtide.engine.timing.timekeeping import Timekeeper
from flowtide.engine.worker._hooks import HookDelivery, hook_failure
from flowtide.engine.worker.background import consumed
from flowtide.engine.worker.holding import HeldRuns
from flowtide.engine.worker.hosting import EngineHost
from flowtide.engine.worker.instruments import NO_INSTRUMENTS, EngineInstruments
from flowtide.engine.worker.leases import LEASE_TTL, count_takeovers, worker_id
from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.engine.worker.presence import Presence
from flowtide.engine.worker.scheduler import Sweeper
from flowtide.engine.worker.taking import RunTaking
from flowtide.engine.worker.threadslots import DEFAULT_THREADS, ThreadSlots
from flowtide.model.flow import Flow
from flowtide.store.base import (
    Commit,
    EventRecord,
    ParkRecord,
    Store,
    StoreError,
)
from flowtide.store.memory import MemoryStore
from flowtide.store.urls import a_store

__all__ = ["DEFER_UNFIREABLE", "Engine"]

DEFER_UNFIREABLE = timedelta(seconds=30)
"""How long a run this engine cannot drive (its nodes do not resolve here) is set aside."""


class Engine:
    """Runs flows.

    ``flows``: a catalog (a mapping id -> flow, or flows) of the flows runs and subflows may use;
    more can be added with :meth:`register_flow` (or are added when a Flow object is started).
    ``registry``: where node ids are resolved (falls back to the process-wide registry, where
    ``@node`` registers). A flow names code (nodes, reducers, source functions) only by the id
    it is registered under: nothing is imported because a flow names it, and a run whose code
    is not registered here is refused (``start``, ``run``) or left to a worker that has it. A
    client (``executes=False``) needs none of it. ``hooks``: callables receiving every event (see
    :mod:`flowtide.engine.events`). ``random``: the random source of jittered backoffs.
    ``max_threads``: the worker threads for sync nodes. ``validate_outputs``: check the state
    each output carries against the output's JSON Schema, where its node type declares one (see
    :mod:`flowtide.engine.flows.contracts`).

    Many engines (in many processes, on many machines) may share one store, each run driven
    by the engine holding its lease (see ``docs/engine.md``): ``owner`` (this engine's worker id,
    unique to its life by default), ``lease_ttl``, ``poll`` (seconds: how often, at the least,
    the sweeper looks at a shared store), ``executes`` (False: a client, which runs no node
    code), ``max_runs`` (how many runs the sweeper lets it hold at once), ``max_value_bytes``
    (see :mod:`flowtide.engine.state.limits`), ``heartbeat`` (record one in the store: by default
    when it executes on a clock that is not virtual; see :mod:`flowtide.engine.worker.heartbeat`).
    ``clock``: where time comes from (the system clock by default); on a store with a clock of
    its own (PostgreSQL) the engine keeps time by the store's, measured against this one (see
    :mod:`flowtide.engine.timing.timekeeping`). ``redact``: a function taking text and returning it
    with its secrets replaced, applied to every error's message, traceback and details before
    it is recorded (default: the hook registered with
    :func:`flowtide.engine.redaction.redact_errors`, if any; see :mod:`flowtide.engine.redaction`).
    ``instruments``: see :mod:`flowtide.engine.worker.instruments`.
    """

    def __init__(
        self,
        *,
        store: Store | None = None,
        clock: Clock | None = None,
        flows: Mapping[str, Flow] | Iterable[Flow] | None = None,
        registry: NodeRegistry | None = None,
        hooks: Sequence[Hook] = (),
        random: random.Random | None = None,
        max_threads: int = DEFAULT_THREADS,
        validate_outputs: bool = False,
        owner: str | None = None,
        lease_ttl: timedelta = LEASE_TTL,
        poll: float = 1.0,
        executes: bool = True,
        max_runs: int | None = None,
        max_value_bytes: int | None = DEFAULT_MAX_VALUE_BYTES,
        heartbeat: bool | None = None,
        redact: Redact | None = None,
        instruments: EngineInstruments | None = None,
    ) -> None:
        self.store: Store = MemoryStore() if store is None else a_store(store, "Engine(store=...)")
        self._time = Timekeeper(self.store, clock)  # (the store's clock, where it has one)
        self.clock: Clock = self._time.clock
        self.owner = owner if owner is not None else worker_id()
        self.lease_ttl = lease_ttl
        self.poll = poll
        self.executes = executes
        self.max_runs = max_runs
        self.max_value_bytes = max_value_bytes
        self._code = EngineCode(registry, executes=executes)
        self._presence = Presence(self, DEFER_UNFIREABLE, heartbeat)
        self._draining = False
        self.redact = redact
        self.instruments = instruments if instruments is not None else NO_INSTRUMENTS
        self.hooks: list[Hook] = list(hooks)
        self.random = random
        self._catalog = FlowCatalog(self.store, self._code.type_of, self.clock)
        self._children = ChildRuns(
            store=self.store,
            clock=self.clock,
            catalog=self._catalog,
            create=lambda *child: self._creation.create_child(*child),  # (made below)
            wait=self.wait,
            wait_parked=self.wait_parked,
            cancel=self.cancel_nowait,
            deadline=run_deadline,
        )
        self._waiters = RunWaiters()
        self._held = HeldRuns(self, self._presence, self._waiters, lambda: self._scheduler)
        self._max_threads = max_threads
        self._contracts = OutputContracts() if validate_outputs else None
        self._threads: NodeThreads | None = None
        self._thread_slots = ThreadSlots(max_threads)
        self._scheduler: Sweeper | None = None
        self._hooks = HookDelivery(self.hooks, self._hook_failed)
        books = self._held.bookkeeping(
            thread_slots=self._thread_slots,
            output_contracts=self._contracts,
            publish=self._hooks.publish,
            start_child=self._children.start,
            ended=self._waiters.ended,
        )
        self._host = EngineHost(self, books)
        self._results = ResultWaiting(self, self._waiters, self._held.runs, self._hooks.caught_up)
        self._creation = RunCreation(self, self._catalog, self._host, self._held)
        self._taking = RunTaking(self, self._held, self._catalog, self._host, self._presence)
        self._signaller = Signaller(
            self,
            held=self._held.runs.get,
            discard=self._held.discard,
            take=self._taking.take_unheld,
        )
        if flows is not None:
            for f in flows.values() if isinstance(flows, Mapping) else flows:
                self.register_flow(f)

    # -- configuration ------------

    def register_flow(self, flow: Flow) -> Flow:
        """Make ``flow`` known by its id (runs started after this one use it); the nodes its
        builder was given as objects are run here without being registered anywhere else."""
        self._code.give(flow)
        return self._catalog.register(flow)

    def flow(self, flow_id: str) -> Flow:
        return self._catalog.flow(flow_id)

    async def learn_flow(self, flow_id: str) -> Flow:
        """The flow registered under ``flow_id``, else the latest version stored under it (read
        again on every call; raises :class:`UnknownFlowError` when there is none). Starting a
        run by id does this first."""
        return await self._catalog.learn(flow_id)

    def add_hook(self, hook: Hook) -> None:
        self.hooks.append(hook)

    @property
    def registry(self) -> NodeRegistry | None:
        """Where node ids are resolved first (see the class)."""
        return self._code.registry

    @registry.setter
    def registry(self, registry: NodeRegistry | None) -> None:
        self._code.registry = registry

    def resolve(self, ref: str) -> NodeImplementation:
        """The node registered under ``ref`` (in ``registry``, else the process-wide registry);
        :class:`NodeResolutionError` naming it when there is none."""
        return self._code.resolve(ref)

    def code(self, plan: FlowPlan) -> FlowCode:
        """The code that runs ``plan``'s flow here, bound once per plan: every node, reducer
        and source function it names, registered (:class:`NodeResolutionError` naming each one
        that is not). A client binds none."""
        return self._code.bind(plan)

    def plan(self, flow_id: str) -> FlowPlan:
        """The plan of the flow registered under ``flow_id`` (one only stored: see
        :meth:`learn_flow`)."""
        return self._catalog.plan(flow_id)

    @property
    def threads(self) -> NodeThreads:
        """The worker threads of sync nodes (started on first use)."""
        if self._threads is None:
            self._threads = NodeThreads(self._max_threads, "flowtide-node")
        return self._threads

    @property
    def catalog(self) -> FlowCatalog:
        """The flows this engine knows, and the plans of stored runs (see
        :class:`~flowtide.engine.flows.catalog.FlowCatalog`)."""
        return self._catalog

    @property
    def held(self) -> HeldRuns:
        """The runs this engine holds in memory, and the renewal of their leases (see
        :class:`~flowtide.engine.worker.holding.HeldRuns`)."""
        return self._held

    @property
    def taking(self) -> RunTaking:
        """How this engine takes the runs its sweeper claims (see
        :class:`~flowtide.engine.worker.taking.RunTaking`)."""
        return self._taking

    @property
    def sweeper(self) -> Sweeper:
        """The engine's sweeper (started on first use)."""
        if self._scheduler is None:
            most = self.max_runs
            # (A held run that waits parked, about to be let go, takes no room.)
            room = None if most is None else (lambda: most - self._held.at_work())
            self._scheduler = Sweeper(
                self.store,
                self.clock,
                self.owner,
                self.lease_ttl,
                self._taking.take,
                poll=self.poll,
                room=room,
                before=self._time.ready,
                instruments=self.instruments,
            )
            self._scheduler.start()
            self._presence.start(self._taking.take, self._time.ready)
        return self._scheduler

    # -- runs ------------

    async def run(
        self,
        flow: Flow | str,
        input: Mapping[str, Any] | None = None,
        *,
        deadline: timedelta | datetime | str | int | None = None,
        run_id: str | None = None,
        entrypoint: str | None = None,
    ) -> RunResult:
        """Start a run and return its result at its first quiescent point: when it ends, or
        when it is parked on the outside world (lifecycle ``parked``, ``result.parked`` lists
        the parked tokens). A run that only waits for timers (waits, backoffs) is not returned
        early: the timers move it on by themselves. See :meth:`start` for the options; use
        :meth:`wait` (or ``start(...)`` and ``handle.result()``) to wait for the end."""
        await self._ready()
        if isinstance(flow, str):
            await self.learn_flow(flow)
        run, state = self._creation.new_run(flow, input, deadline, run_id, entrypoint)
        fut = self._waiters.settle(run.id)
        await self._creation.launch(run, state, entrypoint)
        return await self._results.answer(fut, run.id, parked=True)

    async def wait(self, run_id: str) -> RunResult:
        """The run's result once it has ended (at once if it already has), whichever engine
        drives it."""
        await self._ready()
        return await self._results.end(run_id)

    async def wait_parked(self, run_id: str) -> RunResult:
        """The run at its next quiescent point parked on the outside world, or its end."""
        await self._ready()
        return await self._results.parked(run_id)

    async def start(
        self,
        flow: Flow | str,
        input: Mapping[str, Any] | None = None,
        *,
        deadline: timedelta | datetime | str | int | None = None,
        run_id: str | None = None,
        entrypoint: str | None = None,
    ) -> RunHandle:
        """Create a run and start it; returns at once with its :class:`RunHandle`.

        ``flow``: a flow, or the id of one registered here or stored (its latest stored version,
        see :meth:`learn_flow`). ``deadline``: the whole run's budget, a duration from now
        (``timedelta``, ISO 8601 text, milliseconds) or an absolute instant; default
        ``flow.deadline``. ``entrypoint``: a label of ``flow.entrypoints`` (default ``main``,
        else the first).
        """
        await self._ready()
        if isinstance(flow, str):
            await self.learn_flow(flow)
        run, state = self._creation.new_run(flow, input, deadline, run_id, entrypoint)
        end = self._waiters.end(run.id)
        await self._creation.launch(run, state, entrypoint)
        return RunHandle(self, run.id, end)

    async def resume(self, run_id: str) -> RunHandle:
        """Continue a run from the store (after a crash, or a closed engine), taking it over
        from whoever held it.

        Tokens that were running re-run their attempt (same attempt number, so the same
        ``idempotency_key``); waiting tokens keep their due instants; a scatter re-runs only its
        unfinished items. A run that already ended is returned as it is.
        """
        await self._ready()
        end = self._waiters.end(run_id)
        if run_id in self._held.runs:
            return RunHandle(self, run_id, end)
        now = self.clock.now()
        lease = await self.store.acquire_run(
            run_id, self.owner, now, now + self.lease_ttl, force=True
        )
        count_takeovers(self.instruments, [lease])
        ex = await self._taking.executor(run_id, lease, now) if lease is not None else None
        if ex is None and not end.done():
            await self._waiters.from_store(self.store, run_id)
        return RunHandle(self, run_id, end)

    # -- signals, cancel, explain ------------

    async def signal(
        self,
        run_id: str | None = None,
        *,
        placement: str | None = None,
        key: str | None = None,
        token_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        output: str | None = None,
        idempotency_key: str | None = None,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> SignalReceipt:
        """Signal a parked token, addressed by ``run_id`` and ``placement`` (or ``token_id``),
        or by its correlation ``key`` (optionally within ``run_id``).

        ``payload`` is merged into the run state (through the flow's reducers). With ``output``
        the token takes that output (one the node declares and the placement routes); without,
        the node runs again (``ctx.signal`` is the payload) and decides. A repeated signal with
        the same ``idempotency_key`` gets the first answer (``duplicate=True``) and changes
        nothing. A signal that cannot apply raises :class:`SignalRefused` (``reason``: expired,
        moved_on, cancelled, unknown, not_parked, ambiguous, invalid_output) and changes nothing.

        A worker holding the run, or taking it because nobody holds it alive, applies the
        signal at once. Otherwise (a client; a worker while another holds the run) it is
        recorded in the store as a request, judged at the instant the store recorded it, and
        applied by the run's holder or the next worker to take it (see
        :mod:`flowtide.engine.requests.inbox`); ``wait``: seconds to wait for that worker's
        answer (None: no limit), else :class:`RequestPending` (``wait=0``: at once, once
        recorded); ``sender``: who sends it (a name, kept with the request and in the
        ``signalled`` event)."""
        await self._ready()
        check_signal(key, idempotency_key, payload)  # (before the store is asked anything)
        return await self._signaller.signal(
            run_id, placement, key, token_id, payload, output, idempotency_key, wait, sender
        )

    async def cancel(
        self,
        run_id: str,
        reason: str | None = None,
        *,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> bool:
        """Cancel a run, parked (and let go) or not; False if it had already ended.

        A worker holding the run cancels it at once (its nodes in flight are cancelled); one
        that finds it held by nobody takes it and ends it in one commit, and returns once that
        commit is stored. Otherwise the cancel is recorded in the store as a request that the
        worker holding the run, or the next one to take it, applies (``sender`` as for
        :meth:`signal`); ``wait``: seconds to wait for its answer (None: no limit), else
        :class:`RequestPending` (0: now)."""
        await self._ready()
        here = await self._signaller.cancel_here(run_id, reason, sender)
        if here is not None:
            return here
        return await self._signaller.cancel(run_id, reason, wait, sender)

    def cancel_nowait(self, run_id: str, reason: str | None = None) -> bool:
        """Cancel a run at once if this worker holds it, else record it (True: asked)."""
        ex = self._signaller.holding(run_id)
        if ex is not None:
            return ex.ending.cancel(reason)
        task = asyncio.get_running_loop().create_task(self.cancel(run_id, reason, wait=0))
        task.add_done_callback(consumed)
        return True

    async def explain(
        self, run_id: str, *, placement: str | None = None, token_id: str | None = None
    ) -> Explanation:
        """How a token's deadline was computed: anchor kind and instant, timeout, and which
        setting it came from (placement, node type, implementation default).

        ``placement``: the live token there (else the last token that was there). Once the run
        has ended: the last visit of ``placement`` (or of token ``token_id``), from the history,
        with how it ended."""
        held = self._held.runs.get(run_id)
        live = held.view.tokens if held is not None else None
        plan_of = self._catalog.plan_of_run
        return await explain_stored(
            self.store, plan_of, run_id, placement=placement, token_id=token_id, live=live
        )

    async def explain_run(self, run_id: str) -> list[Explanation]:
        """The last visit of every placement that had a window or timers, from the history (for
        a run that has ended, or one still going)."""
        return await explain_stored_run(self.store, self._catalog.plan_of_run, run_id)

    def held_runs(self) -> list[str]:
        """The ids of the runs this engine holds in memory now."""
        return list(self._held.runs)

    async def parks(self, run_id: str) -> Sequence[ParkRecord]:
        """Every park of the run, oldest first (open and closed)."""
        return await self.store.parks(run_id=run_id)

    async def history(self, run_id: str) -> Sequence[EventRecord]:
        """The run's events, in order."""
        return await self.store.history(run_id)

    async def close(self) -> None:
        """Stop this engine. Live runs are left in the store as they are, to be resumed."""
        if self._scheduler is not None:  # (first: it takes no run from now on)
            await self._scheduler.close()
            self._scheduler = None
        self._held.close()
        with contextlib.suppress(StoreError):
            # Given back: another worker takes them at once (nodes in flight run again there).
            self._presence.gave_back(await self.store.release_runs(self.owner), "closing")
            await self.store.release_runs(self._presence.aside.owner)
        await self._presence.stop()
        self._waiters.fail_all(
            lambda run_id: EngineError(f"the engine was closed; resume run {run_id!r} to finish it")
        )
        await self._hooks.close()
        if self._threads is not None:
            # Does not wait for a node that never returns (its result is dropped).
            self._threads.shutdown()
            self._threads = None
        await asyncio.sleep(0)

    async def drain(self, within: timedelta) -> list[str]:
        """Take no more runs, give back those held parked, let the others park or end for up to
        ``within`` (engine's clock), then close; the ids of the runs still at work then (given
        back: their nodes in flight run again elsewhere, as after a crash)."""
        self._draining = True
        if self._scheduler is not None:
            await self._scheduler.close()
            self._scheduler = None
        for ex in [ex for ex in self._held.runs.values() if ex.run.lifecycle == Lifecycle.PARKED]:
            self._held.discard(ex)
        busy = await self._presence.drained(within, lambda: self._held.runs)
        await self.close()
        return busy

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- internals ------------

    async def _ready(self) -> None:
        await self._time.ready()
        if self.executes and not self._draining:  # (a client takes no runs: workers do)
            _ = self.sweeper

    async def _hook_failed(self, hook: Hook, event: EventRecord, exc: Exception) -> None:
        """Record a hook's failure in the run's history (it is not delivered to hooks)."""
        failed = hook_failure(hook, event, exc, self.clock.now(), self.redact)
        await commit_step(self.store, Commit(event.run_id, events=[failed]), self.clock)
