"""Walking a flow's route graph (placement id -> the placement ids its routes lead to)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


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
