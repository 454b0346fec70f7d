"""The engine: runs flows on asyncio, many runs at once, against a store and a clock (see
``docs/engine.md``).

A run that has only parked and waiting tokens left is let go (nothing of it stays in memory, its
lease is given back); a request, the sweeper or :meth:`Engine.resume` rebuilds it from the
store, in any engine on the same store (see :mod:`flowtide.engine.worker.leases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
from flowtide.engine.result import RunResult
from flowtide.engine.run._commit import commit_step
from flowtide.engine.run.children import ChildRuns
from flowtide.engine.run.executor.executor import RunExecutor
from flowtide.engine.run.starting import new_run
from flowtide.engine.state.limits import DEFAULT_MAX_VALUE_BYTES, check_signal, check_start
from flowtide.engine.timing.deadlines import run_deadline
from flowtide.engine.timing.explain import Explanation, explain_stored, explain_stored_run
from flowtide.engine.timing.scope import CancelScope
from flowtide.engine.timing.timekeeping import Timekeeper
from flowtide.engine.worker._hooks import HookDelivery, hook_failure
from flowtide.engine.worker.background import consumed
from flowtide.engine.worker.hosting import Bookkeeping, EngineHost
from flowtide.engine.worker.instruments import NO_INSTRUMENTS, EngineInstruments
from flowtide.engine.worker.leases import (
    LEASE_TTL,
    LeaseRenewer,
    count_takeovers,
    give_back,
    worker_id,
)
from flowtide.engine.worker.presence import Presence
from flowtide.engine.worker.scheduler import Sweeper
from flowtide.engine.worker.threadslots import DEFAULT_THREADS, ThreadSlots
from flowtide.errors import NodeResolutionError
from flowtide.model.flow import Flow
from flowtide.printable import printable
from flowtide.store.base import (
    Commit,
    EventRecord,
    Lease,
    ParkRecord,
    RunRecord,
    Store,
    StoreError,
    UnknownRunError,
    UnknownStoredFlow,
)
from flowtide.store.memory import MemoryStore
from flowtide.store.urls import a_store

__all__ = ["DEFER_UNFIREABLE", "Engine"]

log = logging.getLogger("flowtide.engine")

FIRE_SLICE = 50
"""How many claimed runs the engine takes before it lets the loop run other work."""

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
            create=self._create_child,
            wait=self.wait,
            wait_parked=self.wait_parked,
            cancel=self.cancel_nowait,
            deadline=run_deadline,
        )
        self._renewer = LeaseRenewer(
            self.store, self.clock, self.owner, lease_ttl, lambda: self._runs, self._discard
        )
        self._runs: dict[str, RunExecutor] = {}
        self._max_threads = max_threads
        self._contracts = OutputContracts() if validate_outputs else None
        self._threads: ThreadPoolExecutor | None = None
        self._thread_slots = ThreadSlots(max_threads)
        self._scheduler: Sweeper | None = None
        self._loading: dict[str, asyncio.Future[RunExecutor | None]] = {}
        self._waiters = RunWaiters()
        self._hooks = HookDelivery(self.hooks, self._hook_failed)
        self._host = EngineHost(self, self._bookkeeping())
        self._signaller = Signaller(
            self, held=self._runs.get, discard=self._discard, take=self._take_unheld
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
    def threads(self) -> ThreadPoolExecutor:
        """The worker threads of sync nodes (started on first use)."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self._max_threads, "flowtide-node")
        return self._threads

    @property
    def sweeper(self) -> Sweeper:
        """The engine's sweeper (started on first use)."""
        if self._scheduler is None:
            most = self.max_runs
            # (A held run that waits parked, about to be let go, takes no room.)
            room = None if most is None else (lambda: most - self._at_work())
            self._scheduler = Sweeper(
                self.store,
                self.clock,
                self.owner,
                self.lease_ttl,
                self._take,
                poll=self.poll,
                room=room,
                before=self._time.ready,
                instruments=self.instruments,
            )
            self._scheduler.start()
            self._presence.start(self._take, self._time.ready)
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
        run, state = self._new_run(flow, input, deadline, run_id, entrypoint)
        fut = self._waiters.settle(run.id)
        await self._launch(run, state, entrypoint)
        return await self._answer(fut, run.id, parked=True)

    async def wait(self, run_id: str) -> RunResult:
        """The run's result once it has ended (at once if it already has), whichever engine
        drives it."""
        await self._ready()
        fut = self._waiters.end(run_id)
        held = self._runs.get(run_id)
        if held is None or held.released:  # (else its executor here answers, at its end)
            await self._waiters.from_store(self.store, run_id)
        return await self._answer(fut, run_id, parked=False)

    async def wait_parked(self, run_id: str) -> RunResult:
        """The run at its next quiescent point parked on the outside world, or its end."""
        await self._ready()
        fut = self._waiters.settle(run_id)
        held = self._runs.get(run_id)
        if held is None:
            # Not held here (let go, or ended): what the store holds is the whole story.
            await self._waiters.from_store(self.store, run_id, parked=True)
        elif (now := held.settler.parked_now()) is not None:
            self._waiters.settled(now)  # (held, and parked already)
        return await self._answer(fut, run_id, parked=True)

    async def _answer(
        self, fut: asyncio.Future[RunResult], run_id: str, *, parked: bool
    ) -> RunResult:
        """``fut``'s result; while another worker drives the run, answered from the store."""
        result = await self._waiters.answer(
            fut, run_id, self.store, lambda: run_id in self._runs, self.poll, parked=parked
        )
        await self._hooks.caught_up()
        return result

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
        run, state = self._new_run(flow, input, deadline, run_id, entrypoint)
        end = self._waiters.end(run.id)
        await self._launch(run, state, entrypoint)
        return RunHandle(self, run.id, end)

    def _new_run(
        self,
        flow: Flow | str,
        input: Mapping[str, Any] | None,
        deadline: timedelta | datetime | str | int | None,
        run_id: str | None,
        entrypoint: str | None,
    ) -> tuple[RunRecord, dict[str, Any]]:
        """A new run's record (lifecycle ``pending``, not stored yet) and state."""
        texts = check_start(input or {}, run_id, self.max_value_bytes)
        flow_id = self.register_flow(flow).id if isinstance(flow, Flow) else flow
        if self.executes:
            self.code(self.plan(flow_id))  # (its code is registered here, or nothing is stored)
        return new_run(
            self.flow(flow_id),
            self._catalog.digest(flow_id),
            self._catalog.children(flow_id),
            self.clock.now(),
            texts,
            deadline,
            run_id,
            entrypoint,
        )

    async def _launch(self, run: RunRecord, state: dict[str, Any], entrypoint: str | None) -> None:
        """Store the new run and start its executor (a client leaves it to a worker)."""
        if not self.executes:
            await self._catalog.keep_document(run.flow_id)
            await self._store_run(run, state, held=False)
            return
        ex = await self._create(self.plan(run.flow_id), run, state, None)
        ex.run_start.launch(entrypoint)

    async def _create_child(
        self, plan: FlowPlan, run: RunRecord, state: dict[str, Any], scope: CancelScope
    ) -> RunExecutor:
        ex = await self._create(plan, run, state, scope, stored=True)
        ex.run_start.launch(None)
        return ex

    async def _create(
        self,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        parent_scope: CancelScope | None,
        *,
        stored: bool = False,
    ) -> RunExecutor:
        """A run created in the store, held by this engine, which drives it: its executor held
        here (``stored``: its flow document is in the store already)."""
        code = self.code(plan)  # (its code is registered here, or nothing is stored)
        if not stored:
            await self._catalog.keep_document(run.flow_id)
        lease = await self._store_run(run, state, held=True)
        ex = RunExecutor(self._host, plan, run, state, code=code, parent_scope=parent_scope)
        ex.lease = lease
        self._hold(run.id, ex)
        return ex

    async def _store_run(
        self, run: RunRecord, state: dict[str, Any], *, held: bool
    ) -> Lease | None:
        """The one place a run is created in the store: ``held`` by this engine (its lease), or
        by nobody (a worker will claim it)."""
        lease = Lease(run.id, self.owner, 1, self.clock.now() + self.lease_ttl) if held else None
        await self.store.create_run(run, state, lease=lease)
        return lease

    async def resume(self, run_id: str) -> RunHandle:
        """Continue a run from the store (after a crash, or a closed engine), taking it over
        from whoever held it.

        Tokens that were running re-run their attempt (same attempt number, so the same
        ``idempotency_key``); waiting tokens keep their due instants; a scatter re-runs only its
        unfinished items. A run that already ended is returned as it is.
        """
        await self._ready()
        end = self._waiters.end(run_id)
        if run_id in self._runs:
            return RunHandle(self, run_id, end)
        now = self.clock.now()
        lease = await self.store.acquire_run(
            run_id, self.owner, now, now + self.lease_ttl, force=True
        )
        count_takeovers(self.instruments, [lease])
        ex = await self._executor(run_id, lease, now) if lease is not None else None
        if ex is None and not end.done():
            await self._waiters.from_store(self.store, run_id)
        return RunHandle(self, run_id, end)

    async def _executor(
        self, run_id: str, lease: Lease | None, now: datetime | None = None
    ) -> RunExecutor | None:
        """The run's executor: in memory, or rebuilt from the store under ``lease`` (a claim's
        or a resume's: a live holder it was taken from lets go at its next commit, see
        :meth:`Store.acquire_run`, and its nodes in flight run again), or under none (see
        :meth:`_load`); None: the run ended. A rebuilt run fires its due entries come by ``now``
        (default: the clock's now)."""
        while (loading := self._loading.get(run_id)) is not None:
            ex = await asyncio.shield(loading)
            if ex is not None or lease is None:  # (else found held, by this claim: rebuilt)
                return ex
        ex = self._runs.get(run_id)
        if ex is not None and not ex.released:
            return ex
        fut: asyncio.Future[RunExecutor | None] = asyncio.get_running_loop().create_future()
        self._loading[run_id] = fut
        try:
            try:
                ex = await self._load(run_id, lease, now or self.clock.now())
            except (EngineError, StoreError, NodeResolutionError):
                if lease is not None:
                    await self._give_back(lease)  # (this engine cannot drive it: untouched)
                raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        finally:
            del self._loading[run_id]
        fut.set_result(ex)
        return ex

    async def _load(self, run_id: str, lease: Lease | None, now: datetime) -> RunExecutor | None:
        """Rebuild the run's executor from the store (one read: its snapshot), under ``lease``,
        and fire what is due by ``now``. Without (a wake's): only if nobody held the run (else
        None), its lease taken by its first commit (``Commit.take``), settled by the wake."""
        snapshot = await self.store.load_run(run_id)
        run = snapshot.run
        if Lifecycle(run.lifecycle).terminal:
            return None
        if lease is None and (snapshot.lease is not None or snapshot.epoch is None):
            return None  # (held, or a store that does not say by whom: taken the usual way)
        plan = await self._catalog.plan_of_run(run)
        code = self.code(plan)  # (refused before anything of the run is run)
        ex = RunExecutor(self._host, plan, run, snapshot.state, code=code)
        ex.lease = lease
        if lease is None:
            ex.taking = Lease(run_id, self.owner, (snapshot.epoch or 0) + 1, now + self.lease_ttl)
        self._hold(run_id, ex)
        self._presence.took(run_id, run.flow_id)
        if run.lifecycle == Lifecycle.PENDING:
            ex.run_start.launch(run.options.get("entrypoint"))
            return ex
        try:
            ex.restore(snapshot)
            ex.resume_tokens()
            ex.fire_come(snapshot.due, now)
        except BaseException:
            self._forget(ex)  # (its lease is given back by the caller)
            ex.close(notify=False)
            raise
        if lease is not None:  # (a wake's is settled by its unpin: no settle task made useless)
            ex.maybe_drained()
        return ex

    async def _fire_due(self, ex: RunExecutor, now: datetime) -> int:
        """Fire the due entries of a run held here whose instant has come by ``now``."""
        return ex.fire_come(await self.store.due_of(ex.run.id), now)

    async def _take(self, leases: Sequence[Lease], now: datetime) -> int:
        """Runs the sweeper claimed at ``now``: each is found here, or rebuilt from the store,
        and its due entries fired; how many runs were rebuilt and entries fired (0: all under
        way already). Every :data:`FIRE_SLICE` runs the loop gets a turn."""
        count_takeovers(self.instruments, leases)
        done = 0
        for n, lease in enumerate(leases, 1):
            if n % FIRE_SLICE == 0:
                await asyncio.sleep(0)
            held = self._runs.get(lease.run_id)
            if held is not None and not held.released:
                if held.lease is None or held.lease.epoch == lease.epoch:
                    held.lease = lease
                    done += await self._fire_due(held, now)
                    continue
                # Taken by another engine meanwhile (a signal, a cancel) and given back: what
                # is held here is out of date. Rebuilt below.
                self._discard(held)
            try:
                await self._executor(lease.run_id, lease, now)
                done += 1
            except UnknownRunError:
                continue  # the run is gone: nothing to fire
            except (EngineError, NodeResolutionError, UnknownStoredFlow) as exc:
                # This engine cannot drive the run (its flow or nodes cannot be resolved here):
                # it waits for a worker that can.
                await self._presence.cannot_drive(lease.run_id, exc)
                continue
            except StoreError as exc:
                log.warning("cannot take run %s: %s", printable(lease.run_id), exc)
        return done

    async def _take_unheld(self, run_id: str, wake: bool = False) -> RunExecutor | None:
        """Claim a run nobody holds alive and fire what is due, as the sweeper would; its
        executor if held here now (a run another worker holds is left to it). ``wake`` (a
        signal's): rebuilt first if nobody holds it, its lease taken by the wake's commit."""
        now = self.clock.now()
        try:
            with contextlib.suppress(EngineError, NodeResolutionError, UnknownStoredFlow):
                if wake and (ex := await self._executor(run_id, None, now)):
                    return ex
            lease = await self.store.acquire_run(run_id, self.owner, now, now + self.lease_ttl)
            if lease is not None:
                await self._take([lease], now)
        except UnknownRunError:
            return None  # (a signal to it is refused)
        except StoreError as exc:
            log.warning("cannot take run %s: %s", printable(run_id), exc)
        ex = self._runs.get(run_id)
        return ex if ex is not None and not ex.released else None

    def _hold(self, run_id: str, ex: RunExecutor) -> None:
        """Hold the run's executor (and keep its lease renewed while any is held)."""
        self._runs[run_id] = ex
        self._renewer.start()

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

        A worker holding the run cancels it at once (its nodes in flight are cancelled).
        Otherwise the cancel is recorded in the store as a request that the worker holding the
        run, or the next one to take it, applies (``sender`` as for :meth:`signal`); ``wait``:
        seconds to wait for its answer (None: no limit), else :class:`RequestPending` (0: now)."""
        await self._ready()
        ex = await self._signaller.adopt(run_id)
        if ex is not None:
            return ex.ending.cancel(reason, sender)
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
        held = self._runs.get(run_id)
        live = held.tokens if held is not None else None
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
        return list(self._runs)

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
        for ex in list(self._runs.values()):
            ex.close()
        self._runs.clear()
        self._renewer.close()
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
            self._threads.shutdown(wait=False, cancel_futures=True)
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
        for ex in [ex for ex in self._runs.values() if ex.run.lifecycle == Lifecycle.PARKED]:
            self._discard(ex)
        busy = await self._presence.drained(within, lambda: self._runs)
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

    def _at_work(self) -> int:
        return sum(ex.run.lifecycle != Lifecycle.PARKED for ex in self._runs.values())

    def _forget(self, ex: object) -> None:
        for run_id, held in list(self._runs.items()):
            if held is ex:
                del self._runs[run_id]
        self._presence.changed.set()
        if self.max_runs is not None:
            self._wake_sweeper()  # (room for another run)

    def _bookkeeping(self) -> Bookkeeping:
        """What this engine does when one of its executors tells it something."""
        return Bookkeeping(
            thread_slots=self._thread_slots,
            output_contracts=self._contracts,
            wake_sweeper=self._wake_sweeper,
            publish=self._hooks.publish,
            start_child=self._children.start,
            let_go=self._let_go,
            discard=self._discard,
            defer=self._defer,
            forget=self._forget_ended,
            unavailable=self._unavailable,
            settled=self._settled,
            ended=self._waiters.ended,
        )

    def _let_go(self, ex: object) -> None:
        """The run is quiescent: nothing of it stays in memory."""
        if isinstance(ex, RunExecutor):
            self._presence.let_go(ex.run)
        self._forget(ex)

    def _forget_ended(self, ex: object) -> None:
        """The run has ended: this engine stops holding it."""
        if isinstance(ex, RunExecutor) and self._runs.get(ex.run.id) is ex:
            self._presence.ended(ex.run)
        self._forget(ex)

    def _settled(self, result: RunResult) -> None:
        self._waiters.settled(result)
        self._presence.changed.set()
        if self.max_runs is not None:
            self._wake_sweeper()  # (a run held parked takes no room)

    def _unavailable(self, ex: object, error: Exception) -> None:
        """The store kept failing under this executor: drop it and tell who waits on its run."""
        self._discard(ex)
        if isinstance(ex, RunExecutor):
            self._waiters.fail(ex.run.id, error)

    def _discard(self, ex: object) -> None:
        """What this executor knows is stale (another process moved the run): drop it. If its
        lease is still this engine's, the run is given back, for a fresh view to go on with."""
        self._forget(ex)
        if isinstance(ex, RunExecutor):
            ex.close(notify=False)
            run_id = ex.run.id
            if ex.lease is not None and ex.lease.owner == self.owner:
                self._presence.gave_back([run_id], "out of date here")
                task = asyncio.get_running_loop().create_task(self._give_back(ex.lease))
                task.add_done_callback(consumed)
            if self._waiters.waiting(run_id):
                # Whoever waits here learns the run's end from the store, if another actor
                # has ended it.
                task = asyncio.get_running_loop().create_task(
                    self._waiters.from_store(self.store, run_id)
                )
                task.add_done_callback(consumed)

    def _defer(self, ex: object, delay: timedelta) -> None:
        """Drop this executor; nobody takes its run for ``delay`` (a deadline not come yet)."""
        self._forget(ex)
        if isinstance(ex, RunExecutor):
            ex.close(notify=False)
            task = asyncio.get_running_loop().create_task(
                self._presence.aside.defer(ex.run.id, delay)
            )
            task.add_done_callback(consumed)

    async def _give_back(self, lease: Lease) -> None:
        await give_back(self.store, self.clock, lease)
        self._wake_sweeper()

    def _wake_sweeper(self, when: datetime | None = None) -> None:
        if self._scheduler is not None:  # (none in a client, or once closed)
            self._scheduler.wake(when)

    async def _hook_failed(self, hook: Hook, event: EventRecord, exc: Exception) -> None:
        """Record a hook's failure in the run's history (it is not delivered to hooks)."""
        failed = hook_failure(hook, event, exc, self.clock.now(), self.redact)
        await commit_step(self.store, Commit(event.run_id, events=[failed]), self.clock)
