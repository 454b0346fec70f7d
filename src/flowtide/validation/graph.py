"""Graph checks: ids, entrypoints, routes, reachability, ends and joins."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

from flowtide.errors import Problem
from flowtide.model.graphs import reach
from flowtide.model.placements import KIND_NAMES, Join, JoinMode, Phase, Terminal
from flowtide.validation.pointers import pointer
from flowtide.validation.subject import Subject


def _names(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


def duplicate_ids(subject: Subject) -> Iterator[Problem]:
    """Every placement whose id an earlier placement already uses."""
    first: dict[str, int] = {}
    located = [(subject.index(pos), p.id) for pos, p in subject.positions()]
    located += [(u.index, u.id) for u in subject.unreadable if u.id is not None]
    for index, pid in sorted(located):
        if pid in first:
            earlier = subject.source_pointer(pointer("placements", first[pid]))
            yield Problem(
                f"placement id {pid!r} is used twice (first at {earlier})",
                pointer=pointer("placements", index, "id"),
                placement=pid,
            )
        else:
            first[pid] = index


def entrypoints(subject: Subject) -> Iterator[Problem]:
    """Each entrypoint names an existing placement that is not a phase."""
    for label, target in subject.flow.entrypoints.items():
        where = pointer("entrypoints", label)
        if target not in subject.ids:
            yield Problem(
                f"entrypoint {label!r} names placement {target!r}, which does not exist",
                pointer=where,
            )
        elif isinstance(_find(subject, target), Phase):
            yield Problem(
                f"entrypoint {label!r} names phase {target!r}; a phase runs before or after "
                "the run and cannot start it",
                pointer=where,
                placement=target,
            )


def route_targets(subject: Subject) -> Iterator[Problem]:
    """Each route leads to an existing placement that is not a phase."""
    for pos, p in subject.positions():
        for output, targets in p.route_map().items():
            for item, target in enumerate(targets):
                if target not in subject.ids:
                    yield Problem(
                        f"route {output!r} leads to placement {target!r}, which does not exist",
                        pointer=subject.route_at(pos, output, item),
                        placement=p.id,
                    )
                elif isinstance(_find(subject, target), Phase):
                    yield Problem(
                        f"route {output!r} leads to phase {target!r}; a phase "
                        "runs before or after the run and cannot be routed to",
                        pointer=subject.route_at(pos, output, item),
                        placement=p.id,
                    )


def terminals(subject: Subject) -> Iterator[Problem]:
    """A flow has at least one terminal."""
    if subject.flow.terminals():
        return
    if any(u.kind == "terminal" or u.kind not in KIND_NAMES for u in subject.unreadable):
        return  # an unreadable placement may be the terminal
    yield Problem(
        "the flow has no terminal placement, so no run can ever end "
        "(add one: kind 'terminal', outcome 'completed')",
        pointer="/placements",
    )


def unreachable(subject: Subject) -> Iterator[Problem]:
    """Every placement but the phases can be reached from some entrypoint.

    Skipped while an entrypoint is broken (what it was meant to reach is unknown).
    """
    if not subject.entrypoints_known or not subject.routes_known:
        return
    if any(not _startable(subject, t) for t in subject.flow.entrypoints.values()):
        return
    reached = reach(_successors(subject), subject.flow.entrypoints.values())
    labels = ", ".join(subject.flow.entrypoints)
    for pos, p in subject.positions():
        if isinstance(p, Phase) or p.id in reached:
            continue
        yield Problem(
            f"placement {p.id!r} cannot be reached from any entrypoint (entrypoints: {labels})",
            pointer=subject.at(pos),
            placement=p.id,
        )


def dead_ends(subject: Subject) -> Iterator[Problem]:
    """No reachable placement is one from which a run can never reach a terminal."""
    if not subject.entrypoints_known:
        return
    forward = _successors(subject)
    backward: dict[str, set[str]] = defaultdict(set)
    for source, _output, target in subject.edges():
        backward[target].add(source)
    # Ends: terminals, and what the checks cannot see past (unreadable or missing placements).
    ends = {p.id for p in subject.flow.placements if isinstance(p, Terminal)}
    ends |= subject.unreadable_ids
    ends |= {t for _s, _o, t in subject.edges() if t not in subject.ids}
    can_end = reach(backward, ends)
    reached = reach(forward, subject.flow.entrypoints.values())
    for pos, p in subject.positions():
        if p.id not in reached or p.id in can_end or isinstance(p, Phase):
            continue
        onward = sorted(reach(forward, [p.id]) - {p.id})
        then = f"; from it a run can only go on to {_names(onward)}" if onward else ""
        yield Problem(
            f"placement {p.id!r} can never reach a terminal, so a run that gets there "
            f"cannot end{then}",
            pointer=subject.at(pos),
            placement=p.id,
        )


def joins(subject: Subject) -> Iterator[Problem]:
    """A join merges two branches or more, and its quorum is not more than its branches."""
    if not subject.routes_known:
        return
    incoming: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for source, output, target in subject.edges():
        incoming[target].add((source, output))
    for pos, p in subject.positions():
        if not isinstance(p, Join):
            continue
        branches = sorted(incoming.get(p.id, set()))
        if len(branches) < 2:
            came = ", ".join(f"{s!r} on {o!r}" for s, o in branches) or "nowhere"
            yield Problem(
                f"join {p.id!r} has {len(branches)} incoming branch"
                f"{'' if len(branches) == 1 else 'es'} (from {came}); "
                "a join merges two branches or more",
                pointer=subject.at(pos),
                placement=p.id,
            )
        if p.mode is JoinMode.QUORUM and p.quorum is not None and p.quorum > len(branches):
            yield Problem(
                f"join {p.id!r} waits for a quorum of {p.quorum}, but only {len(branches)} "
                f"branch{'' if len(branches) == 1 else 'es'} lead to it",
                pointer=subject.at(pos, "quorum"),
                placement=p.id,
            )


def _startable(subject: Subject, placement_id: str) -> bool:
    return placement_id in subject.ids and not isinstance(_find(subject, placement_id), Phase)


def _find(subject: Subject, placement_id: str) -> object | None:
    flow = subject.flow
    return flow.placement(placement_id) if flow.has_placement(placement_id) else None


def _successors(subject: Subject) -> Mapping[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, _output, target in subject.edges():
        graph[source].add(target)
    return graph
