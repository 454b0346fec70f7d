"""What the engine precomputes per flow: implementations, effective settings, reachability."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine.deadlines import needs_node_anchor
from flowtide.model.flow import Flow, node_ref
from flowtide.model.graphs import reach
from flowtide.model.placements import (
    PARKED_OUTPUT,
    AnyPlacement,
    Join,
    PhaseKind,
    Task,
    Terminal,
)
from flowtide.model.settings import NodeSettings

Resolver = Callable[[str], NodeImplementation]

_EMPTY = NodeSettings()


@dataclass(frozen=True, slots=True)
class FastMove:
    """Where one output of a plain task leads when the move needs nothing but the token's
    move: a single target that is a task with no window and no timers (the move also starts its
    attempt), a terminal that does not fail (the move also records it) or a join (the token
    then arrives there, as on the general path)."""

    target: str
    node: str | None
    """The node the target task runs (None: the target is a terminal)."""
    outcome: str | None
    """The terminal's outcome (None: the target is a task or a join)."""
    join: bool = False
    """The target is a join (``node`` and ``outcome`` are None)."""


@dataclass(frozen=True, slots=True)
class FastTask:
    """A plain task: its node runs on the loop (``async def``, or sync ``inline``) and it has no
    window and no timers, so an attempt needs no deadline timer, no anchor and no due entry.
    The executor's fast path runs such a task's attempt and, for an output in ``moves``, its
    token's move, in one function (see ``RunExecutor._fast_task``)."""

    impl: NodeImplementation
    outputs: frozenset[str]
    """The node's declared outputs but ``parked`` (which parks the token)."""
    only: str | None
    """The node's output when it declares exactly one (a node returning None takes it)."""
    moves: dict[str, FastMove]


@dataclass(slots=True)
class FlowPlan:
    flow: Flow
    placements: dict[str, AnyPlacement]
    impls: dict[str, NodeImplementation] = field(default_factory=dict)
    """Placement id -> the node it runs (tasks, phases, node-bodied scatters)."""
    settings: dict[str, NodeSettings] = field(default_factory=dict)
    """Placement id -> effective settings: the implementation's defaults, overlaid by the node
    type the flow document declares (if any), overlaid by the placement's own settings."""
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    """Placement id -> setting name -> where its effective value comes from: ``placement``,
    ``node type`` (declared by the flow document), ``implementation default``; a setting set
    nowhere is absent."""
    reach: dict[str, frozenset[str]] = field(default_factory=dict)
    """Placement id -> every placement reachable from it by routes (itself only via a loop)."""
    unarmed: frozenset[str] = frozenset()
    """Placements whose effective settings have no timeout and no timers: an attempt there
    has no window to resolve and nothing to arm."""
    fast: dict[str, FastTask] = field(default_factory=dict)
    """Plain tasks (see :class:`FastTask`), by placement id."""
    anchored: bool = False
    """Some placement's window or timer is anchored at the first arrival: a run of this flow
    may have node anchors stored (else it never has any)."""
    post: bool = False
    """The flow has ``post`` phases (they run after a run's end)."""
    _joins: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, flow: Flow, resolve: Resolver) -> FlowPlan:
        plan = cls(flow, {p.id: p for p in flow.placements})
        for p in flow.placements:
            ref = node_ref(p)
            base_impl = _EMPTY
            # Where each setting comes from, nearest layer last (for explain).
            layers: list[tuple[str, NodeSettings | None]] = []
            if ref is not None:
                impl = resolve(ref)
                plan.impls[p.id] = impl
                base_impl = impl.type.settings
                layers.append(("implementation default", base_impl))
                declared = flow.node_type(ref)
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
        plan.unarmed = frozenset(
            pid for pid, st in plan.settings.items() if st.timeout is None and not st.timers
        )
        plan.anchored = any(needs_node_anchor(st) for st in plan.settings.values())
        plan.post = bool(flow.phases(PhaseKind.POST))
        plan._plan_fast()
        succ = {p.id: p.successors() for p in flow.placements}
        for start, onward in succ.items():
            plan.reach[start] = frozenset(reach(succ, onward))
        return plan

    def _plan_fast(self) -> None:
        for p in self.flow.placements:
            if not isinstance(p, Task) or p.id not in self.unarmed:
                continue
            impl = self.impls[p.id]
            if not (impl.is_async or impl.execution == "inline"):
                continue
            moves: dict[str, FastMove] = {}
            for output, targets in p.route_map().items():
                if len(targets) != 1:
                    continue
                q = self.placements.get(targets[0])
                if isinstance(q, Task) and q.id in self.unarmed:
                    moves[output] = FastMove(q.id, self.impls[q.id].id, None)
                elif isinstance(q, Terminal) and not q.fails:
                    moves[output] = FastMove(q.id, None, q.outcome)
                elif isinstance(q, Join):
                    moves[output] = FastMove(q.id, None, None, join=True)
            # ``parked`` is not a plain output: returning it parks the token.
            plain = frozenset(impl.outputs) - {PARKED_OUTPUT}
            only = impl.outputs[0] if len(impl.outputs) == 1 and plain else None
            self.fast[p.id] = FastTask(impl, plain, only, moves)

    def can_reach(self, source: str, target: str) -> bool:
        return target in self.reach.get(source, frozenset())

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
