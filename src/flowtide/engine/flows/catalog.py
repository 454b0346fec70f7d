"""The flows an engine knows, and the flow documents kept in its store.

Flows are registered by id (the latest registration of an id wins, for runs started after it).
Each run records the digest of the document it was started on (``options["flow_digest"]``):
the engine that resumes it, whichever it is, plans it from that very document, the registered
flow's when it is the same, the stored one's otherwise (see
:mod:`flowtide.engine.flows.stored_flows`).
Plans are made once per document, and need no code: what a node is (its outputs, whether it
parks, its default settings) comes from its registered implementation where there is one, else
from the type the document declares (a flow built in Python declares those of its nodes, and a
stored document those registered where it was stored: see :func:`stored_flow`).

A flow id no flow was registered under is learned from the store: its latest stored document
(:meth:`FlowCatalog.learn`), looked up again each time a run is started by id, so that a long-lived
engine starts what was registered last.
"""

from __future__ import annotations

from flowtide.clock import Clock
from flowtide.engine.errors import EngineError, UnknownFlowError
from flowtide.engine.flows.plan import FlowPlan, TypeLookup
from flowtide.engine.flows.stored_flows import flow_from_stored, flows_named, stored_flow
from flowtide.model.flow import Flow
from flowtide.store.base import RunRecord, Store, StoredFlow, UnknownStoredFlow

__all__ = ["FlowCatalog"]


class FlowCatalog:
    def __init__(self, store: Store, implemented: TypeLookup, clock: Clock | None = None) -> None:
        self._store = store
        self._implemented = implemented
        self._clock = clock
        """Says when a document is first stored from here (None: not recorded)."""
        self._flows: dict[str, Flow] = {}
        self._learned: set[str] = set()
        """The flow ids whose flow was read from the store, not registered."""
        self._stored: dict[str, StoredFlow] = {}
        """Flow id -> the registered flow as the store keeps it (made on first use)."""
        self._kept: set[tuple[str, str]] = set()
        """(flow id, digest) of the documents put in the store from here."""
        self._plans: dict[tuple[str, str], FlowPlan] = {}
        """(flow id, digest) -> the plan of that document."""
        self._children: dict[str, dict[str, str]] = {}
        """Flow id -> :meth:`children` (made on first use; dropped when a flow changes)."""

    def register(self, flow: Flow) -> Flow:
        if self._flows.get(flow.id) is not flow:
            self._flows[flow.id] = flow
            self._stored.pop(flow.id, None)
            self._children.clear()
        self._learned.discard(flow.id)
        return flow

    async def learn(self, flow_id: str) -> Flow:
        """The flow registered under ``flow_id``; else the latest document of that id in the
        store, read again (with the flows it runs that are not registered here either) so that
        what was stored last is used (raises :class:`UnknownFlowError` when there is none)."""
        await self._learn(flow_id, set())
        return self.flow(flow_id)

    async def _learn(self, flow_id: str, seen: set[str]) -> None:
        seen.add(flow_id)
        if flow_id in self._flows and flow_id not in self._learned:
            return
        try:
            latest = await self._store.latest_flow(flow_id)
        except UnknownStoredFlow:
            raise UnknownFlowError(flow_id, looked_in_store=True) from None
        known = self._stored.get(flow_id)
        if flow_id not in self._flows or known is None or known.digest != latest.digest:
            self._flows[flow_id] = flow_from_stored(latest)
            self._stored[flow_id] = latest
            self._kept.add((flow_id, latest.digest))
            self._learned.add(flow_id)
            self._children.clear()
        for name in flows_named(self._flows[flow_id]) - seen:
            try:
                await self._learn(name, seen)
            except UnknownFlowError:
                continue  # (a run that reaches it fails there, saying so)

    def __contains__(self, flow_id: object) -> bool:
        return flow_id in self._flows

    def flow(self, flow_id: str) -> Flow:
        try:
            return self._flows[flow_id]
        except KeyError:
            raise UnknownFlowError(flow_id) from None

    def digest(self, flow_id: str) -> str:
        """The digest of the registered flow's document."""
        return self._stored_form(flow_id).digest

    def plan(self, flow_id: str) -> FlowPlan:
        """The plan of the flow registered under ``flow_id``."""
        return self._plan_of(self.flow(flow_id), self.digest(flow_id))

    async def keep(self, flow_id: str) -> FlowPlan:
        """The registered flow's plan, its document put in the store (once from here)."""
        plan = self.plan(flow_id)
        await self.keep_document(flow_id)
        return plan

    async def keep_document(self, flow_id: str) -> None:
        """Put the registered flow's document in the store (once from here), and those of the
        flows it runs (subflows, scatter bodies) that are registered (their nodes need not be
        registered here: workers run them)."""
        for name in (flow_id, *self.children(flow_id)):
            stored = self._stored_form(name)
            if (name, stored.digest) not in self._kept:
                now = self._clock.now() if self._clock is not None else None
                await self._store.put_flow(stored, stored_at=now)
                self._kept.add((name, stored.digest))

    def children(self, flow_id: str) -> dict[str, str]:
        """The registered flows the flow runs, directly or through others: id -> digest (a
        run records them, so that its children run on the documents it started with). Found
        once while the flows registered stay the same (a copy is returned)."""
        known = self._children.get(flow_id)
        if known is None:
            known = self._children[flow_id] = self._find_children(flow_id)
        return dict(known)

    def _find_children(self, flow_id: str) -> dict[str, str]:
        found: dict[str, str] = {}
        todo = [flow_id]
        while todo:
            for p in self.flow(todo.pop()).placements:
                body = getattr(p, "body", None)
                name = getattr(p, "flow", None) or getattr(body, "flow", None)
                if isinstance(name, str) and name in self._flows and name not in found:
                    found[name] = self.digest(name)
                    todo.append(name)
        found.pop(flow_id, None)
        return found

    async def plan_of_child(self, parent: RunRecord, flow_id: str) -> tuple[FlowPlan, str]:
        """The plan of a child run of ``parent`` on ``flow_id``, and its document's digest: the
        document ``parent`` recorded for it, else the registered flow's, else the latest one
        stored."""
        recorded = parent.options.get("flows", {})
        digest = recorded.get(flow_id) if isinstance(recorded, dict) else None
        if not isinstance(digest, str):
            await self.learn(flow_id)
            return self.plan(flow_id), self.digest(flow_id)
        return await self._plan_by_digest(flow_id, digest), digest

    async def plan_of_run(self, run: RunRecord) -> FlowPlan:
        """The plan of the flow document ``run`` was started on."""
        digest = run.options.get("flow_digest")
        if not isinstance(digest, str):
            # A run recorded without its document: only the registered flow can drive it.
            plan = self.plan(run.flow_id)
            if plan.flow.version != run.flow_version:
                raise EngineError(
                    f"run {run.id!r} was started on version {run.flow_version!r} of flow "
                    f"{run.flow_id!r}; this engine knows version {plan.flow.version!r}"
                )
            return plan
        return await self._plan_by_digest(run.flow_id, digest)

    async def _plan_by_digest(self, flow_id: str, digest: str) -> FlowPlan:
        known = self._plans.get((flow_id, digest))
        if known is not None:
            return self._plan_of(known.flow, digest)
        if flow_id in self._flows and self.digest(flow_id) == digest:
            return self.plan(flow_id)
        stored = await self._store.get_flow(flow_id, digest)
        return self._plan_of(flow_from_stored(stored), digest)

    def _stored_form(self, flow_id: str) -> StoredFlow:
        stored = self._stored.get(flow_id)
        if stored is None:
            stored = self._stored[flow_id] = stored_flow(self.flow(flow_id), self._implemented)
        return stored

    def _plan_of(self, flow: Flow, digest: str) -> FlowPlan:
        plan = self._plans.get((flow.id, digest))
        if plan is None or any(self._implemented(ref) for ref in plan.unimplemented):
            # (Planned again once a node's code is registered: its defaults count.)
            plan = self._plans[(flow.id, digest)] = FlowPlan.build(flow, self._implemented)
        return plan
