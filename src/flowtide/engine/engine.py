"""The engine: runs flows on asyncio, many runs at once, against a store and a clock.

::

    engine = Engine(flows=[checkout], clock=VirtualClock(autojump=True))
    result = await engine.run("urn:shop:flow:checkout", {"cart": [...]}, deadline="PT1H")

    handle = await engine.start(checkout, {"cart": [...]})
    handle.cancel(reason="customer left")
    result = await handle.result()

A run can be continued by another engine on the same store (after a crash, or after
:meth:`Engine.close`) with :meth:`Engine.resume`.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
from flowtide.authoring.nodes import registry as default_registry
from flowtide.clock import Clock, SystemClock, VirtualClock
from flowtide.engine.errors import EngineError, UnknownFlowError
from flowtide.engine.events import EventKind, Hook
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.plan import FlowPlan
from flowtide.engine.reducers import copy_state
from flowtide.engine.result import RunResult
from flowtide.engine.run import RunExecutor
from flowtide.engine.scheduler import Scheduler
from flowtide.engine.scope import CancelScope
from flowtide.model.durations import parse_duration
from flowtide.model.flow import Flow
from flowtide.store.base import Commit, DueEntry, EventRecord, RunRecord, Store, TokenRecord
from flowtide.store.memory import MemoryStore

__all__ = ["Engine", "RunHandle"]


class RunHandle:
    """A started run: its id, its result (awaitable) and a way to cancel it."""

    def __init__(self, executor: RunExecutor) -> None:
        self._ex = executor

    @property
    def run_id(self) -> str:
        return self._ex.run.id

    @property
    def done(self) -> bool:
        return self._ex.done.done()

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the run (lifecycle ``cancelled``); False if it had already ended."""
        return self._ex.cancel(reason)

    async def result(self) -> RunResult:
        return await asyncio.shield(self._ex.done)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"


class Engine:
    """Runs flows.

    ``flows``: a catalog (a mapping id -> flow, or flows) of the flows runs and subflows may use;
    more can be added with :meth:`register_flow` (or are added when a Flow object is started).
    ``registry``: where node references are resolved (falls back to the process-wide registry,
    then to importing ``module:attribute``). ``hooks``: callables receiving every event (see
    :mod:`flowtide.engine.events`). ``random``: the random source of jittered backoffs.
    ``max_threads``: the worker threads for sync nodes.
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
        max_threads: int = 32,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.registry = registry
        self.hooks: list[Hook] = list(hooks)
        self.random = random
        self._flows: dict[str, Flow] = {}
        self._plans: dict[str, FlowPlan] = {}
        self._runs: dict[str, RunExecutor] = {}
        self._max_threads = max_threads
        self._threads: ThreadPoolExecutor | None = None
        self._scheduler: Scheduler | None = None
        if flows is not None:
            for f in flows.values() if isinstance(flows, Mapping) else flows:
                self.register_flow(f)

    # -- configuration ------------

    def register_flow(self, flow: Flow) -> Flow:
        old = self._flows.get(flow.id)
        if old is not flow:
            self._flows[flow.id] = flow
            self._plans.pop(flow.id, None)
        return flow

    def flow(self, flow_id: str) -> Flow:
        try:
            return self._flows[flow_id]
        except KeyError:
            raise UnknownFlowError(flow_id) from None

    def add_hook(self, hook: Hook) -> None:
        self.hooks.append(hook)

    def resolve(self, ref: str) -> NodeImplementation:
        if self.registry is not None:
            found = self.registry.get(ref)
            if found is not None:
                return found
        return default_registry.resolve(ref)

    def plan(self, flow_id: str) -> FlowPlan:
        plan = self._plans.get(flow_id)
        if plan is None:
            plan = self._plans[flow_id] = FlowPlan.build(self.flow(flow_id), self.resolve)
        return plan

    @property
    def threads(self) -> ThreadPoolExecutor:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self._max_threads, "flowtide-node")
        return self._threads

    @property
    def scheduler(self) -> Scheduler:
        if self._scheduler is None:
            self._scheduler = Scheduler(self.store, self.clock, self._fire_due)
            self._scheduler.start()
        return self._scheduler

    # -- runs ------------

    async def run(
        self, flow: Flow | str, input: Mapping[str, Any] | None = None, **options: Any
    ) -> RunResult:
        """Start a run and wait for its result (see :meth:`start` for the options)."""
        handle = await self.start(flow, input, **options)
        return await handle.result()

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

        ``deadline``: the whole run's budget, a duration from now (``timedelta``, ISO 8601 text,
        milliseconds) or an absolute instant; default ``flow.deadline``. ``entrypoint``: a label
        of ``flow.entrypoints`` (default ``main``, else the first).
        """
        self._ready()
        if isinstance(flow, Flow):
            self.register_flow(flow)
            flow_id = flow.id
        else:
            flow_id = flow
        plan = self.plan(flow_id)
        now = self.clock.now()
        run = RunRecord(
            id=run_id or uuid.uuid4().hex,
            flow_id=flow_id,
            flow_version=plan.flow.version,
            lifecycle=Lifecycle.PENDING.value,
            created_at=now,
            deadline=_deadline(deadline if deadline is not None else plan.flow.deadline, now),
            options={"entrypoint": entrypoint},
        )
        state = copy_state(input or {})
        await self.store.create_run(run, state)
        ex = RunExecutor(self, plan, run, state)
        self._runs[run.id] = ex
        ex.launch(entrypoint)
        return RunHandle(ex)

    async def _start_child(
        self,
        parent: RunExecutor,
        flow_id: str,
        state: dict[str, Any],
        scope: CancelScope,
        token: TokenRecord | None,
        item: Any,
    ) -> RunExecutor:
        plan = self.plan(flow_id)
        now = self.clock.now()
        run = RunRecord(
            id=uuid.uuid4().hex,
            flow_id=flow_id,
            flow_version=plan.flow.version,
            lifecycle=Lifecycle.PENDING.value,
            created_at=now,
            deadline=_deadline(plan.flow.deadline, now),
            parent_run_id=parent.run.id,
            parent_token_id=token.id if token is not None else None,
            depth=parent.run.depth + 1,
            options={"item": item} if item is not None else {},
        )
        await self.store.create_run(run, state)
        ex = RunExecutor(self, plan, run, state, parent_scope=scope)
        self._runs[run.id] = ex
        ex.launch(None)
        return ex

    async def resume(self, run_id: str) -> RunHandle:
        """Continue a run from the store (after a crash, or a closed engine).

        Tokens that were running re-run their attempt (same attempt number, so the same
        ``idempotency_key``); waiting tokens keep their due instants; a scatter re-runs only its
        unfinished items. A run that already ended is returned as it is.
        """
        self._ready()
        if run_id in self._runs:
            return RunHandle(self._runs[run_id])
        run = await self.store.get_run(run_id)
        plan = self.plan(run.flow_id)
        if plan.flow.version != run.flow_version:
            raise EngineError(
                f"run {run_id!r} was started on version {run.flow_version!r} of flow "
                f"{run.flow_id!r}; this engine knows version {plan.flow.version!r}"
            )
        state = await self.store.get_state(run_id)
        ex = RunExecutor(self, plan, run, state)
        if Lifecycle(run.lifecycle).terminal:
            ex.done.set_result(_stored_result(run, state))
            return RunHandle(ex)
        self._runs[run_id] = ex
        if run.lifecycle == Lifecycle.PENDING:
            ex.launch(run.options.get("entrypoint"))
            return RunHandle(ex)
        ex.restore(await self.store.tokens(run_id), await self.store.history(run_id))
        dues = ex.resume_tokens()
        if dues:
            await self.store.commit(Commit(run_id, due=dues))
            self.scheduler.wake()
        ex._maybe_drained()
        return RunHandle(ex)

    async def history(self, run_id: str) -> Sequence[EventRecord]:
        """The run's events, in order."""
        return await self.store.history(run_id)

    async def close(self) -> None:
        """Stop this engine. Live runs are left in the store as they are, to be resumed."""
        for ex in list(self._runs.values()):
            ex.close()
        self._runs.clear()
        if self._scheduler is not None:
            await self._scheduler.close()
            self._scheduler = None
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None
        await asyncio.sleep(0)

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- internals ------------

    def _ready(self) -> None:
        if isinstance(self.clock, VirtualClock):
            self.clock.start_autojump()
        _ = self.scheduler

    def _forget(self, ex: RunExecutor) -> None:
        if self._runs.get(ex.run.id) is ex:
            del self._runs[ex.run.id]

    def _fire_due(self, entry: DueEntry) -> None:
        ex = self._runs.get(entry.run_id)
        if ex is not None:
            ex.fire_due(entry)

    async def dispatch(self, events: Sequence[EventRecord]) -> None:
        """Hand committed events to the hooks, in order; a failing hook is recorded."""
        for event in events:
            for hook in list(self.hooks):
                try:
                    out = hook(event)
                    if inspect.isawaitable(out):
                        await out
                except Exception as exc:
                    await self.store.commit(
                        Commit(
                            event.run_id,
                            events=[
                                EventRecord(
                                    EventKind.HOOK_FAILED.value,
                                    event.run_id,
                                    self.clock.now(),
                                    event.placement,
                                    event.attempt,
                                    event.token_id,
                                    {
                                        "hook": getattr(hook, "__qualname__", repr(hook)),
                                        "event": event.kind,
                                        "error": f"{type(exc).__name__}: {exc}",
                                    },
                                )
                            ],
                        )
                    )


def _deadline(value: timedelta | datetime | str | int | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise EngineError(f"deadline {value!r} needs a time zone")
        return value
    return now + parse_duration(value)


def _stored_result(run: RunRecord, state: dict[str, Any]) -> RunResult:
    from flowtide.engine.result import ErrorInfo

    data = run.result or {}
    return RunResult(
        run_id=run.id,
        lifecycle=Lifecycle(run.lifecycle),
        outcome=run.outcome,
        state=state,
        errors=tuple(
            ErrorInfo(e["type"], e["message"], e.get("placement")) for e in data.get("errors", ())
        ),
    )
