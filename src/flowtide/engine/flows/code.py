"""The code that runs a flow: its nodes, source functions and reducers, bound by an executing
engine to what is registered in its process (``@node``, ``@flowtide.source``,
``@flowtide.reducer``).

A flow names code only by registered ids. A document may come from anyone who can write to the
store, so nothing is imported because a flow names it, and a reference nothing registers is
refused before any of the run's code runs: :class:`~flowtide.errors.NodeResolutionError` names
each (the placement or state key that makes it, its JSON pointer, the reference) and carries
the references in ``refs``. A client binds no code (see :mod:`flowtide.engine.flows.plan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowtide.authoring.functions import FunctionRegistry, reducers, sources
from flowtide.authoring.nodes import NodeImplementation, NodeRegistry, given_nodes
from flowtide.authoring.nodes import registry as default_registry
from flowtide.engine.flows.plan import FlowPlan
from flowtide.errors import NodeResolutionError
from flowtide.jsonpointer import join
from flowtide.model.flow import BUILTIN_REDUCERS, Flow
from flowtide.model.nodes import NodeType
from flowtide.model.placements import GatherStrategy, Scatter

__all__ = ["EngineCode", "FlowCode", "NodeResolver", "SourceFunction", "bind_code"]

NodeResolver = Callable[[str], NodeImplementation]
"""Node id -> its registered implementation (:class:`NodeResolutionError` when there is none)."""

SourceFunction = Callable[..., Any]
"""A scatter's source function: ``fn(ctx)`` -> an iterable, an async iterable, or an awaitable
of either (see :mod:`flowtide.engine.run.scatter`)."""


@dataclass(slots=True)
class FlowCode:
    """The code bound to one flow document's plan in an executing engine (a client's is
    empty)."""

    impls: dict[str, NodeImplementation] = field(default_factory=dict)
    """Placement id -> the node it runs (tasks, phases, node-bodied scatters)."""
    source_fns: dict[str, SourceFunction] = field(default_factory=dict)
    """Scatter placement id -> its source function (scatters with ``source_fn``)."""
    reducers: dict[str, Callable[[Any, Any], Any]] = field(default_factory=dict)
    """Reducer id -> its function (the flow's state reducers and its gathers' reducers that
    are not built in)."""


def bind_code(
    plan: FlowPlan,
    nodes: NodeResolver,
    reducers: FunctionRegistry,
    sources: FunctionRegistry,
) -> FlowCode:
    """Every code reference of ``plan``'s flow resolved against what is registered; raises
    :class:`NodeResolutionError` naming each one that is not (one line each)."""
    code = FlowCode()
    missing: list[str] = []
    refs: list[str] = []
    node_refs: list[str] = []

    def refuse(where: str, pointer: str, exc: NodeResolutionError) -> None:
        missing.append(f"{where} ({pointer}): {exc}")
        refs.extend(exc.refs)
        node_refs.extend(exc.nodes)

    for index, p in enumerate(plan.flow.placements):
        at = join("", "placements", index)
        ref = plan.nodes.get(p.id)
        if ref is not None:
            try:
                code.impls[p.id] = nodes(ref)
            except NodeResolutionError as exc:
                node_at = at + ("/body/node" if isinstance(p, Scatter) else "/node")
                refuse(f"placement {p.id!r}", node_at, exc)
        if not isinstance(p, Scatter):
            continue
        if p.source_fn is not None:
            try:
                code.source_fns[p.id] = sources.resolve(p.source_fn)
            except NodeResolutionError as exc:
                refuse(f"placement {p.id!r}", at + "/source_fn", exc)
        reducer = p.gather.reducer
        if p.gather.strategy is GatherStrategy.REDUCE and reducer is not None:
            try:
                code.reducers[reducer] = reducers.resolve(reducer)
            except NodeResolutionError as exc:
                refuse(f"placement {p.id!r}", at + "/gather/reducer", exc)
    for key, how in plan.flow.reducers.items():
        if how in BUILTIN_REDUCERS:
            continue
        try:
            code.reducers[how] = reducers.resolve(how)
        except NodeResolutionError as exc:
            refuse(f"state key {key!r}", join("", "reducers", key), exc)
    if missing:
        head = f"flow {plan.flow.id!r} names code that is not registered here"
        raise NodeResolutionError("; ".join([head, *missing]), refs, nodes=node_refs)
    return code


class EngineCode:
    """The code an engine knows: nodes in its ``registry``, given as objects to the builders of
    the flows it was given (:func:`~flowtide.authoring.nodes.given_nodes`), or in the
    process-wide registry; reducers and source functions in theirs. An executing engine binds
    it to each plan once; a client (``executes`` False) binds none."""

    def __init__(self, registry: NodeRegistry | None, *, executes: bool) -> None:
        self.registry = registry
        self._executes = executes
        self._given: dict[str, NodeImplementation] = {}
        self._bound: dict[int, tuple[FlowPlan, FlowCode]] = {}
        """id(plan) -> the plan and the code bound to it."""

    def give(self, flow: Flow) -> None:
        """Know the nodes ``flow``'s builder was given as objects."""
        for ref, impl in given_nodes(flow).items():
            self._given.setdefault(ref, impl)

    def get(self, ref: str) -> NodeImplementation | None:
        found = self.registry.get(ref) if self.registry is not None else None
        if found is None:
            found = self._given.get(ref) or default_registry.get(ref)
        return found

    def resolve(self, ref: str) -> NodeImplementation:
        """The node registered under ``ref``; :class:`NodeResolutionError` naming it if none."""
        found = self.get(ref)
        return found if found is not None else default_registry.resolve(ref)

    def type_of(self, ref: str) -> NodeType | None:
        """The type the implementation of node ``ref`` declares, when it is known here."""
        found = self.get(ref)
        return found.type if found is not None else None

    def bind(self, plan: FlowPlan) -> FlowCode:
        """The code that runs ``plan``'s flow here, bound once per plan (nothing in a client)."""
        if not self._executes:
            return _NO_CODE
        known = self._bound.get(id(plan))
        if known is None or known[0] is not plan:
            known = self._bound[id(plan)] = (plan, bind_code(plan, self.resolve, reducers, sources))
        return known[1]


_NO_CODE = FlowCode()
