"""Walking a flow's route graph (placement id -> the placement ids its routes lead to).

Nothing here stores, for every placement, everything reachable from it: a chain of 10,000
placements would need fifty million entries. :class:`Reachability` keeps the strongly connected
components (the loops) and answers reachability on demand over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set

__all__ = ["Reachability", "reach", "strongly_connected"]

PAIRS_KEPT = 16_384
"""Answers :meth:`Reachability.can_reach` keeps (the engine asks the same few questions again
and again: a join and the placements of its branches, an anchored placement and its loop)."""


def reach(graph: Mapping[str, Iterable[str]], start: Iterable[str]) -> set[str]:
    """Every node reachable in ``graph`` from the nodes of ``start``, which are included."""
    seen: set[str] = set()
    stack = list(start)
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(graph.get(current, ()))
    return seen


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph``, each listed after every component
    reachable from it (Tarjan's algorithm, without recursion, so a chain of any length fits)."""
    nodes, children = _numbered(graph)
    return [[nodes[member] for member in c] for c in _components(children)]


def _numbered(graph: Mapping[str, Iterable[str]]) -> tuple[list[str], list[list[int]]]:
    """The graph's nodes (targets included) and, by their position, the positions of each
    one's targets, in name order (so that components come out in the same order every time)."""
    nodes = list(dict.fromkeys([*graph, *(t for ts in graph.values() for t in ts)]))
    position = {node: i for i, node in enumerate(nodes)}
    children = [[position[t] for t in sorted(set(graph.get(node, ())))] for node in nodes]
    return nodes, children


def _components(children: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm on numbered nodes; the walk keeps its path in flat lists (a long chain
    makes no nested frames, and few objects for the collector to walk)."""
    size = len(children)
    index = [-1] * size
    low = [0] * size
    on_stack = [False] * size
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(size):
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        path = [root]  # the walk's current path, and how far each node's children were taken
        taken = [0]
        while path:
            node = path[-1]
            kids = children[node]
            done = taken[-1]
            if done < len(kids):
                taken[-1] = done + 1
                child = kids[done]
                if index[child] < 0:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack[child] = True
                    path.append(child)
                    taken.append(0)
                elif on_stack[child] and index[child] < low[node]:
                    low[node] = index[child]
                continue
            path.pop()
            taken.pop()
            if path and low[node] < low[path[-1]]:
                low[path[-1]] = low[node]
            if low[node] == index[node]:
                component: list[int] = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


class Reachability(Mapping[str, Set[str]]):
    """Which nodes of a graph can be reached from which, answered on demand.

    As a mapping: node -> the set of nodes reachable from it (itself only through a loop), a
    view whose membership test is :meth:`can_reach` and which is listed only when iterated.

    The graph is kept as its components (:func:`strongly_connected`): a node's loop is its
    component when that has more than one node or a route from the node to itself. Components
    are numbered in the order Tarjan's algorithm closes them, so a route between two components
    always goes to a lower number: a question whose target's component has a higher number than
    the source's is answered at once, and a search never goes below the target's number.
    """

    def __init__(self, graph: Mapping[str, Iterable[str]]) -> None:
        nodes, children = _numbered(graph)
        components = _components(children)
        of = [0] * len(nodes)  # node position -> its component's number
        for number, members in enumerate(components):
            for member in members:
                of[member] = number
        self._component = {node: of[i] for i, node in enumerate(nodes)}
        self._members = [tuple(nodes[m] for m in members) for members in components]
        onward: list[list[int]] = [[] for _ in components]
        looping = [len(members) > 1 for members in components]
        for source, targets in enumerate(children):
            here = of[source]
            for target in targets:
                there = of[target]
                if there == here:
                    looping[here] = True
                elif there not in onward[here]:
                    onward[here].append(there)
        self._onward = onward
        self._looping = looping
        self._answers: dict[tuple[int, int], bool] = {}

    # -- loops ----------------------------------------------------------------------------------

    def loop_of(self, node: str) -> int | None:
        """The number of ``node``'s loop (its component), or None if it is in no loop."""
        number = self._component.get(node)
        return number if number is not None and self._looping[number] else None

    def in_loop(self, node: str) -> bool:
        """Whether a route from ``node`` can lead back to it (a route to itself counts)."""
        return self.loop_of(node) is not None

    def same_loop(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` are in one loop: each can be reached from the other."""
        loop = self.loop_of(a)
        return loop is not None and loop == self._component.get(b)

    # -- reachability ---------------------------------------------------------------------------

    def can_reach(self, source: str, target: str) -> bool:
        """Whether some path of routes leads from ``source`` to ``target`` (to ``source`` itself
        only through a loop)."""
        here = self._component.get(source)
        there = self._component.get(target)
        if here is None or there is None or there > here:
            return False
        if here == there:
            return self._looping[here]
        key = (here, there)
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) >= PAIRS_KEPT:
                self._answers.clear()
            found = self._answers[key] = self._search(here, there)
        return found

    def reachable_from(self, source: str) -> set[str]:
        """Every node :meth:`can_reach` finds from ``source``."""
        here = self._component.get(source)
        if here is None:
            return set()
        out: set[str] = set(self._members[here]) if self._looping[here] else set()
        seen = {here}
        stack = list(self._onward[here])
        while stack:
            number = stack.pop()
            if number in seen:
                continue
            seen.add(number)
            out.update(self._members[number])
            stack.extend(self._onward[number])
        return out

    def _search(self, here: int, there: int) -> bool:
        seen = {here}
        stack = [here]
        while stack:
            for number in self._onward[stack.pop()]:
                if number == there:
                    return True
                if number > there and number not in seen:
                    seen.add(number)
                    stack.append(number)
        return False

    # -- Mapping ----------------------------------------------------------------------------

    def __getitem__(self, source: str) -> Set[str]:
        if source not in self._component:
            raise KeyError(source)
        return _Reachable(self, source)

    def __iter__(self) -> Iterator[str]:
        return iter(self._component)

    def __len__(self) -> int:
        return len(self._component)


class _Reachable(Set[str]):
    """The nodes reachable from one node, as a set that is only listed when iterated."""

    __slots__ = ("_graph", "_source")

    def __init__(self, graph: Reachability, source: str) -> None:
        self._graph = graph
        self._source = source

    def __contains__(self, target: object) -> bool:
        return isinstance(target, str) and self._graph.can_reach(self._source, target)

    def __iter__(self) -> Iterator[str]:
        return iter(self._graph.reachable_from(self._source))

    def __len__(self) -> int:
        return len(self._graph.reachable_from(self._source))
