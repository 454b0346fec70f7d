"""What the engine precomputes per flow: implementations, effective settings, reachability and
loops."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine.deadlines import needs_node_anchor
from flowtide.engine.reducers import StateMerger
from flowtide.model.flow import Flow, node_ref
from flowtide.model.graphs import Reachability
from flowtide.model.placements import (
    PARKED_OUTPUT,
    AnyPlacement,
    Join,
    JoinMode,
    PhaseKind,
    Task,
    Terminal,
)
from flowtide.model.settings import NodeSettings, TimeoutAnchor

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
    """A plain task: its node runs on the loop (``async def``, or sync ``inline``) or in a worker
    thread (sync ``thread``), and it has no window and no timers, so an attempt needs no deadline
    timer, no anchor and no due entry.
    The executor's fast path runs such a task's attempt and, for an output in ``moves``, its
    token's move, in one function (see ``RunExecutor._fast_task``)."""

    task: Task
    impl: NodeImplementation
    outputs: frozenset[str]
    """The node's declared outputs but ``parked`` (which parks the token)."""
    only: str | None
    """The node's output when it declares exactly one (a node returning None takes it)."""
    moves: dict[str, FastMove]
    threaded: bool = False
    """The node is sync and runs in a worker thread."""


@dataclass(frozen=True, slots=True)
class FastEntry:
    """An entrypoint whose first attempt may run eagerly in ``Engine.run`` (see
    :mod:`flowtide.engine.fastpark`): no pre phase, a task whose node runs on the loop
    (``async def`` or sync ``inline``), with no timers and no node anchor, so that starting the
    attempt needs nothing but the start commit, and a park needs nothing but the park commit."""

    placement: Task
    impl: NodeImplementation
    settings: NodeSettings
    merger: StateMerger
    """The flow's reducers (a run's own merger holds nothing else)."""
    from_instance: bool = False
    """The window (if any) is anchored at the run's creation (else at the attempt or park)."""
    timeout_s: float = 0.0
    """The window's timeout in seconds (as its data records it)."""


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
    reach: Reachability = field(default_factory=lambda: Reachability({}))
    """Placement id -> every placement reachable from it by routes (itself only via a loop):
    answered on demand (see :meth:`can_reach`), never stored for every pair."""
    unarmed: frozenset[str] = frozenset()
    """Placements whose effective settings have no timeout and no timers: an attempt there
    has no window to resolve and nothing to arm."""
    fast: dict[str, FastTask] = field(default_factory=dict)
    """Plain tasks (see :class:`FastTask`), by placement id."""
    join_needs: dict[str, int] = field(default_factory=dict)
    """Join placement id -> how many branches fire it ``success``: 1 (``first``), the quorum;
    0 for ``all`` (every branch of the split: the split's count)."""
    off_loop: frozenset[str] = frozenset()
    """Placements whose node runs off the event loop (a worker thread, a subprocess): an
    attempt there always suspends, so a branch reaching one is not started eagerly."""
    threaded: frozenset[str] = frozenset()
    """The placements of :attr:`off_loop` whose node runs in a worker thread: a branch starting
    at one is driven by an :class:`~flowtide.engine.eager.Carrier`, not a task."""
    started: dict[str, str] = field(default_factory=dict)
    """Task placement id -> the node it runs, for the tasks with no window and no timers: an
    attempt's start there is the token marked running and its ``node_started`` event."""
    anchored: bool = False
    """Some placement's window or timer is anchored at the first arrival: a run of this flow
    may have node anchors stored (else it never has any)."""
    post: bool = False
    """The flow has ``post`` phases (they run after a run's end)."""
    _joins: dict[str, frozenset[str]] = field(default_factory=dict)
    _split_joins: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    _reaches: dict[tuple[str, ...], bool] = field(default_factory=dict)
    _entries: dict[str, FastEntry | None] = field(default_factory=dict)
    _started_nodes: dict[tuple[str, ...], tuple[str, ...] | None] = field(default_factory=dict)
    signal_ends: dict[tuple[str, str], Terminal | None] = field(default_factory=dict)
    """(placement id, output) -> the terminal that does not fail a signal with that valid output
    takes the token to alone, else None: filled by :mod:`flowtide.engine.letgo` as signals come
    (only outputs the node declares and the placement routes: a bounded set)."""

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
        plan.off_loop = frozenset(
            pid
            for pid, impl in plan.impls.items()
            if not impl.is_async and impl.execution in ("thread", "process")
        )
        plan.threaded = frozenset(
            pid for pid in plan.off_loop if plan.impls[pid].execution == "thread"
        )
        for p in flow.placements:
            if isinstance(p, Join):
                if p.mode == JoinMode.ALL:
                    plan.join_needs[p.id] = 0
                elif p.mode == JoinMode.FIRST:
                    plan.join_needs[p.id] = 1
                else:
                    plan.join_needs[p.id] = p.quorum or 1
            elif isinstance(p, Task) and p.id in plan.unarmed:
                plan.started[p.id] = plan.impls[p.id].id
        plan.reach = Reachability({p.id: p.successors() for p in flow.placements})
        return plan

    def _plan_fast(self) -> None:
        for p in self.flow.placements:
            if not isinstance(p, Task) or p.id not in self.unarmed:
                continue
            impl = self.impls[p.id]
            threaded = not impl.is_async and impl.execution == "thread"
            if not (impl.is_async or impl.execution == "inline" or threaded):
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
            self.fast[p.id] = FastTask(p, impl, plain, only, moves, threaded)

    def entry_target(self, entry: str | None) -> str:
        """The placement a run started at ``entry`` (a label or a placement id) begins at."""
        if entry is not None and entry in self.flow.entrypoints:
            return self.flow.entrypoints[entry]
        return entry or self.flow.main_entrypoint

    def fast_entry(self, target: str) -> FastEntry | None:
        """The entry placement ``target`` as a :class:`FastEntry`, or None (decided once)."""
        try:
            return self._entries[target]
        except KeyError:
            pass
        found = self._entries[target] = self._fast_entry(target)
        return found

    def _fast_entry(self, target: str) -> FastEntry | None:
        if self.flow.phases(PhaseKind.PRE):
            return None
        p = self.placements.get(target)
        if not isinstance(p, Task):
            return None
        impl = self.impls[p.id]
        if impl.execution != "inline":
            return None  # a worker thread or a process: the executor holds it
        settings = self.settings[p.id]
        if settings.timers or needs_node_anchor(settings):
            return None
        timeout = settings.timeout
        return FastEntry(
            p,
            impl,
            settings,
            StateMerger(self.flow.reducers),
            settings.timeout_anchor is TimeoutAnchor.INSTANCE,
            timeout.total_seconds() if timeout is not None else 0.0,
        )

    def started_nodes(self, targets: Sequence[str]) -> tuple[str, ...] | None:
        """The node each of a split's ``targets`` runs, when every one is in :attr:`started`
        (else None; computed once per list of targets)."""
        key = tuple(targets)
        try:
            return self._started_nodes[key]
        except KeyError:
            pass
        started = self.started
        found = self._started_nodes[key] = (
            tuple(started[t] for t in key) if all(t in started for t in key) else None
        )
        return found

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
