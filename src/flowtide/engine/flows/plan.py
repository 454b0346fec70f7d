"""What a flow is, precomputed once per flow document: placements, the node each runs and its
declared type, effective settings, routes, reachability and loops. A plan needs no code: a
client plans a stored flow without any node module; the code that runs it is bound apart, by
an executing engine only (see :mod:`flowtide.engine.flows.code`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flowtide.engine.timing.deadlines import needs_node_anchor
from flowtide.model.flow import Flow, node_ref
from flowtide.model.graphs import Reachability
from flowtide.model.nodes import NodeType
from flowtide.model.placements import (
    AnyPlacement,
    Join,
    JoinMode,
    PhaseKind,
)
from flowtide.model.settings import NodeSettings

TypeLookup = Callable[[str], NodeType | None]
"""Node id -> the type its registered implementation declares, or None when none is known here
(a client without the node's code)."""

_EMPTY = NodeSettings()


@dataclass(slots=True)
class FlowPlan:
    flow: Flow
    placements: dict[str, AnyPlacement]
    nodes: dict[str, str] = field(default_factory=dict)
    """Placement id -> the id of the node it runs (tasks, phases, node-bodied scatters)."""
    types: dict[str, NodeType] = field(default_factory=dict)
    """Placement id -> its node's type: its registered implementation's when known here, else
    the one the flow document declares (absent: neither)."""
    unknown: dict[str, str] = field(default_factory=dict)
    """Placement id -> its node's id, where the node's default settings are unknown: the
    document declares no type for it and no implementation is registered here."""
    implemented: frozenset[str] = frozenset()
    """The node ids whose registered implementation gave their defaults."""
    unimplemented: frozenset[str] = frozenset()
    """The node ids of the flow whose implementation was not registered here when it was
    planned (a plan made again once one is, so that its defaults count)."""
    settings: dict[str, NodeSettings] = field(default_factory=dict)
    """Placement id -> effective settings: the implementation's defaults, overlaid by the node
    type the flow document declares (if any), overlaid by the placement's own settings."""
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    """Placement id -> setting name -> where its effective value comes from: ``placement``,
    ``node type`` (declared by the flow document), ``implementation default``; a setting set
    nowhere is absent."""
    reach: Reachability = field(default_factory=lambda: Reachability({}))
    """Placement id -> every placement reachable from it by routes (itself only via a loop):
    answered on demand (see :meth:`can_reach`), never stored for every pair."""
    unarmed: frozenset[str] = frozenset()
    """Placements whose effective settings have no timeout and no timers: an attempt there
    has no window to resolve and nothing to arm."""
    join_needs: dict[str, int] = field(default_factory=dict)
    """Join placement id -> how many branches fire it ``success``: 1 (``first``), the quorum;
    0 for ``all`` (every branch of the split: the split's count)."""
    anchored: bool = False
    """Some placement's window or timer is anchored at the first arrival: a run of this flow
    may have node anchors stored (else it never has any)."""
    post: bool = False
    """The flow has ``post`` phases (they run after a run's end)."""
    _joins: dict[str, frozenset[str]] = field(default_factory=dict)
    _split_joins: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    _reaches: dict[tuple[str, ...], bool] = field(default_factory=dict)

    @classmethod
    def build(cls, flow: Flow, implemented: TypeLookup) -> FlowPlan:
        """The plan of ``flow``; ``implemented`` gives the types of the nodes whose code is
        registered here (their default settings), None for the others."""
        plan = cls(flow, {p.id: p for p in flow.placements})
        known: set[str] = set()
        for p in flow.placements:
            ref = node_ref(p)
            base_impl = _EMPTY
            # Where each setting comes from, nearest layer last (for explain).
            layers: list[tuple[str, NodeSettings | None]] = []
            if ref is not None:
                plan.nodes[p.id] = ref
                own = implemented(ref)
                declared = flow.node_type(ref)
                if own is not None:
                    known.add(ref)
                    plan.types[p.id] = own
                    base_impl = own.settings
                    layers.append(("implementation default", base_impl))
                elif declared is not None:
                    plan.types[p.id] = declared
                else:
                    plan.unknown[p.id] = ref
                if declared is not None:
                    layers.append(("node type", declared.settings))
            layers.append(("placement", p.node_settings()))
            plan.settings[p.id] = flow.settings_at(p, defaults=base_impl)
            sources: dict[str, str] = {}
            for name, layer in layers:
                if layer is None:
                    continue
                for key in layer.model_fields_set:
                    value = getattr(layer, key)
                    if value is None:
                        continue
                    if name == "node type" and getattr(base_impl, key, None) == value:
                        continue  # the declared type repeats the implementation's default
                    sources[key] = name
            plan.sources[p.id] = sources
        plan.implemented = frozenset(known)
        plan.unimplemented = frozenset(plan.nodes.values()) - plan.implemented
        plan.unarmed = frozenset(
            pid for pid, st in plan.settings.items() if st.timeout is None and not st.timers
        )
        plan.anchored = any(needs_node_anchor(st) for st in plan.settings.values())
        plan.post = bool(flow.phases(PhaseKind.POST))
        for p in flow.placements:
            if isinstance(p, Join):
                if p.mode == JoinMode.ALL:
                    plan.join_needs[p.id] = 0
                elif p.mode == JoinMode.FIRST:
                    plan.join_needs[p.id] = 1
                else:
                    plan.join_needs[p.id] = p.quorum or 1
        plan.reach = Reachability({p.id: p.successors() for p in flow.placements})
        return plan

    def outputs(self, placement: str) -> tuple[str, ...] | None:
        """The outputs the node at ``placement`` declares (None: its type is unknown here)."""
        found = self.types.get(placement)
        return found.outputs if found is not None else None

    def entry_target(self, entry: str | None) -> str:
        """The placement a run started at ``entry`` (a label or a placement id) begins at."""
        if entry is not None and entry in self.flow.entrypoints:
            return self.flow.entrypoints[entry]
        return entry or self.flow.main_entrypoint

    def can_reach(self, source: str, target: str) -> bool:
        """Whether a token at ``source`` may come to ``target`` by routes (to ``source`` itself
        only through a loop)."""
        return self.reach.can_reach(source, target)

    def loop_of(self, placement: str) -> int | None:
        """The number of ``placement``'s loop (its strongly connected component), or None when
        no route leads back to it."""
        return self.reach.loop_of(placement)

    def in_loop(self, placement: str) -> bool:
        """Whether routes from ``placement`` can lead back to it (a route to itself counts)."""
        return self.reach.in_loop(placement)

    def same_loop(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` are in one loop. A token that moves from a placement's loop
        to a placement outside it has left the loop (a ``node`` anchor there is released)."""
        return self.reach.same_loop(a, b)

    def joins_of(self, targets: Sequence[str]) -> tuple[str, ...]:
        """The joins of :meth:`joins_from` for each of a split's ``targets``, in that order,
        each once (computed once per list of targets)."""
        key = tuple(targets)
        found = self._split_joins.get(key)
        if found is None:
            found = self._split_joins[key] = tuple(
                dict.fromkeys(j for t in key for j in self.joins_from(t))
            )
        return found

    def reaches_joins(self, targets: Sequence[str]) -> bool:
        """Whether every one of a split's ``targets`` is, or can reach, every join of
        :meth:`joins_of` (computed once per list of targets)."""
        key = tuple(targets)
        found = self._reaches.get(key)
        if found is None:
            joins = self.joins_of(key)
            found = self._reaches[key] = all(
                t == j or self.can_reach(t, j) for t in key for j in joins
            )
        return found

    def joins_from(self, placement: str) -> frozenset[str]:
        """The joins a token at ``placement`` may arrive at matched on its innermost split:
        following routes, a further split opens a level that its own join closes; a join reached
        at the token's level ends the walk (computed once per placement)."""
        found = self._joins.get(placement)
        if found is not None:
            return found
        limit = len(self.placements)
        out: set[str] = set()
        seen: set[tuple[str, int]] = set()
        stack = [(placement, 0)]
        while stack:
            here, depth = stack.pop()
            if (here, depth) in seen or depth > limit:
                continue
            seen.add((here, depth))
            p = self.placements.get(here)
            if p is None:
                continue
            if p.kind == "join":
                if depth == 0:
                    out.add(here)
                    continue
                depth -= 1
            for targets in p.route_map().values():
                step = 1 if len(targets) > 1 else 0
                stack.extend((t, depth + step) for t in targets)
        result = self._joins[placement] = frozenset(out)
        return result
