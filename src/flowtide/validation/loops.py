"""Loops that park with nothing to end them.

A loop whose tokens park (wait on the outside world) and loop again can run forever if every
window inside it is rearmed on each visit (the ``park`` anchor). It is bounded when a placement of
the loop has a ``node`` or ``instance`` anchored timeout or interrupting timer, when the flow has a
run deadline, or when a ``wait`` outside the loop races it into a ``first`` join.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping

from flowtide.errors import Problem
from flowtide.model.graphs import reach, strongly_connected
from flowtide.model.placements import PARKED_OUTPUT, AnyPlacement, Join, JoinMode, Task, Wait
from flowtide.model.settings import TimeoutAnchor
from flowtide.validation.subject import Subject

_GLOBAL_ANCHORS = frozenset({TimeoutAnchor.NODE, TimeoutAnchor.INSTANCE})


def unbounded_parking_loops(subject: Subject) -> Iterator[Problem]:
    """Warn about each loop that contains a parking node and has no window bounding it."""
    flow = subject.flow
    if flow.deadline is not None:
        return
    graph: dict[str, set[str]] = defaultdict(set)
    for source, _output, target in subject.edges():
        graph[source].add(target)
    position = {p.id: i for i, p in subject.positions()}
    for component in strongly_connected(graph):
        members = [pid for pid in component if pid in position]
        looping = len(component) > 1 or any(pid in graph.get(pid, ()) for pid in component)
        if not looping or len(members) != len(component):
            continue
        members.sort(key=position.__getitem__)
        placements = [flow.placements[position[pid]] for pid in members]
        parking = [p for p in placements if _parks(subject, p)]
        if not parking or any(_bounds(subject, p) for p in placements):
            continue
        if _raced_by_a_wait(subject, graph, set(component)):
            continue
        loop = ", ".join(repr(pid) for pid in members)
        parks = ", ".join(repr(p.id) for p in parking)
        yield Problem(
            f"the loop through {loop} parks at {parks} and no window bounds it (no 'node' or "
            "'instance' anchored timeout or interrupting timer in it, no run deadline, no wait "
            "branch racing it into a 'first' join): a run may wait in it forever",
            pointer=subject.at(position[parking[0].id]),
            placement=parking[0].id,
            severity="warning",
        )


def _parks(subject: Subject, placement: AnyPlacement) -> bool:
    if not isinstance(placement, Task):
        return False
    if PARKED_OUTPUT in placement.routes:
        return True
    declared = subject.node_of(placement)
    return declared is not None and declared.type.parks


def _bounds(subject: Subject, placement: AnyPlacement) -> bool:
    if not placement.has_settings:
        return False
    settings = subject.effective_settings(placement)
    if settings.timeout is not None and settings.anchor in _GLOBAL_ANCHORS:
        return True
    return any(t.interrupting and t.anchor in _GLOBAL_ANCHORS for t in settings.timers or ())


def _raced_by_a_wait(subject: Subject, graph: Mapping[str, set[str]], component: set[str]) -> bool:
    """A wait outside the loop and the loop both lead into one ``first`` join."""
    from_loop = reach(graph, component)
    for join in subject.flow.placements:
        if not (isinstance(join, Join) and join.mode is JoinMode.FIRST and join.id in from_loop):
            continue
        for wait in subject.flow.placements:
            if (
                isinstance(wait, Wait)
                and wait.id not in component
                and join.id in reach(graph, [wait.id])
            ):
                return True
    return False
