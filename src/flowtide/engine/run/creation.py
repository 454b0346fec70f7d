"""Creating a run: its record made from what the caller asked, stored (the one place a run is
created in the store) and, in a worker, held and driven here; a client leaves it to a worker.

A subflow's child is created the same way, in its parent's cancel scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine.flows.catalog import FlowCatalog
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.executor.core import RunExecutor
from flowtide.engine.run.starting import new_run
from flowtide.engine.state.limits import check_start
from flowtide.engine.timing.scope import CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.instruments import seconds
from flowtide.model.flow import Flow
from flowtide.store.base import Commit, EventRecord, Lease, RunRecord, Store

__all__ = ["CreatingEngine", "Holder", "RunCreation"]


class CreatingEngine(Protocol):
    """What :class:`RunCreation` reads of its engine (read when asked: a test may give an engine
    another clock)."""

    store: Store
    clock: Clock
    owner: str
    lease_ttl: timedelta
    executes: bool
    max_value_bytes: int | None

    def register_flow(self, flow: Flow) -> Flow: ...
    def flow(self, flow_id: str) -> Flow: ...
    def plan(self, flow_id: str) -> FlowPlan: ...
    def code(self, plan: FlowPlan) -> FlowCode: ...


class Holder(Protocol):
    """Where a created run's executor is held (see :mod:`flowtide.engine.worker.holding`)."""

    def hold(self, run_id: str, ex: RunExecutor) -> None: ...


class RunCreation:
    """Creates ``engine``'s runs: their flows' documents kept by ``catalog``, their executors
    built on ``host`` and held by ``held``."""

    def __init__(
        self, engine: CreatingEngine, catalog: FlowCatalog, host: RunHost, held: Holder
    ) -> None:
        self._engine = engine
        self._catalog = catalog
        self._host = host
        self._held = held

    def new_run(
        self,
        flow: Flow | str,
        input: Mapping[str, Any] | None,
        deadline: timedelta | datetime | str | int | None,
        run_id: str | None,
        entrypoint: str | None,
    ) -> tuple[RunRecord, dict[str, Any]]:
        """A new run's record (lifecycle ``pending``, not stored yet) and state."""
        e = self._engine
        texts = check_start(input or {}, run_id, e.max_value_bytes)
        flow_id = e.register_flow(flow).id if isinstance(flow, Flow) else flow
        if e.executes:
            e.code(e.plan(flow_id))  # (its code is registered here, or nothing is stored)
        return new_run(
            e.flow(flow_id),
            self._catalog.digest(flow_id),
            self._catalog.children(flow_id),
            e.clock.now(),
            texts,
            deadline,
            run_id,
            entrypoint,
        )

    async def launch(self, run: RunRecord, state: dict[str, Any], entrypoint: str | None) -> None:
        """Store the new run and start its executor (a client leaves it to a worker)."""
        if not self._engine.executes:
            await self._catalog.keep_document(run.flow_id)
            await self._store_run(run, state)
            return
        ex = await self._create(self._engine.plan(run.flow_id), run, state, None, entrypoint)
        ex.run_start.launch()

    async def create_child(
        self, plan: FlowPlan, run: RunRecord, state: dict[str, Any], scope: CancelScope
    ) -> RunExecutor:
        ex = await self._create(plan, run, state, scope, None, stored=True)
        ex.run_start.launch()
        return ex

    async def _create(
        self,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        parent_scope: CancelScope | None,
        entrypoint: str | None,
        *,
        stored: bool = False,
    ) -> RunExecutor:
        """A run created in the store, held by this engine, which drives it: its executor held
        here, the run created started (with its first commit: see :meth:`RunStart.begin
        <flowtide.engine.run.executor.launching.RunStart.begin>`); ``stored``: its flow
        document is in the store already."""
        code = self._engine.code(plan)  # (its code is registered here, or nothing is stored)
        if not stored:
            await self._catalog.keep_document(run.flow_id)
        ex = RunExecutor(self._host, plan, run, state, code=code, parent_scope=parent_scope)
        first = ex.run_start.begin(entrypoint)
        e = self._engine
        first.lease = ex.lease = Lease(run.id, e.owner, 1, e.clock.now() + e.lease_ttl)
        try:
            events = await self._store_run(run, state, first)
        except BaseException:
            ex.run_start.abandon()
            raise
        self._held.hold(run.id, ex)
        ex.committer.stored(first, events)
        return ex

    async def _store_run(
        self, run: RunRecord, state: dict[str, Any], first: Commit | None = None
    ) -> Sequence[EventRecord]:
        """The one place a run is created in the store: by nobody (a worker will claim it), or,
        with its ``first`` commit, held by this engine (the lease the commit carries; measured
        as a step's commit); the commit's events, with their seq."""
        clock = self._host.clock
        sent = clock.now()
        lease = first.lease if first is not None else None
        try:
            return await self._engine.store.create_run(run, state, first, lease=lease)
        finally:
            if first is not None:
                self._host.instruments.commit(seconds(sent, clock.now()))
