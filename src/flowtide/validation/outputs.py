"""Output checks: nodes are known, routes take outputs the placement has, outputs are routed."""

from __future__ import annotations

from collections.abc import Iterator

from flowtide.errors import Problem
from flowtide.model.placements import PARKED_OUTPUT, TIMEOUT_OUTPUT, AnyPlacement, Task
from flowtide.validation.subject import Subject


def undeclared_nodes(subject: Subject) -> Iterator[Problem]:
    """A warning for each task whose node neither the document nor the registry declares."""
    for pos, p in subject.positions():
        if not isinstance(p, Task) or p.node in subject.unreadable_node_types:
            continue
        if subject.node_of(p) is None:
            yield Problem(
                f"node {p.node!r} is not declared in the document nor registered, "
                "so its outputs cannot be checked",
                pointer=subject.at(pos, "node"),
                placement=p.id,
                severity="warning",
            )


def routed_outputs(subject: Subject) -> Iterator[Problem]:
    """Every route names an output the placement can take."""
    for pos, p in subject.positions():
        allowed = subject.outputs(p)
        if allowed is None:
            continue
        for output in p.route_map():
            if output not in allowed:
                yield Problem(
                    _no_such_output(subject, p, output, allowed),
                    pointer=subject.at(pos, "routes", output),
                    placement=p.id,
                )


def _no_such_output(subject: Subject, p: AnyPlacement, output: str, allowed: frozenset[str]) -> str:
    declared = subject.node_of(p)
    if not isinstance(p, Task) or declared is None:
        return (
            f"a {p.kind} has no output {output!r} "
            f"(outputs: {', '.join(_ordered(p.fixed_outputs, allowed))})"
        )
    timers = sorted(allowed - set(declared.type.outputs) - {TIMEOUT_OUTPUT, PARKED_OUTPUT})
    from_timers = f"; its timers take {', '.join(timers)}" if timers else ""
    return (
        f"node {p.node!r} has no output {output!r} "
        f"(it declares: {', '.join(declared.type.outputs)}{from_timers}; "
        f"{TIMEOUT_OUTPUT!r} and {PARKED_OUTPUT!r} are always routable)"
    )


def unrouted_outputs(subject: Subject) -> Iterator[Problem]:
    """A warning for each output a task's node declares that no route takes."""
    for pos, p in subject.positions():
        if not isinstance(p, Task):
            continue
        declared = subject.node_of(p)
        if declared is None:
            continue
        routes = p.route_map()
        for output in declared.type.outputs:
            if output in routes or output in (TIMEOUT_OUTPUT, PARKED_OUTPUT):
                continue
            yield Problem(
                f"output {output!r} of node {p.node!r} has no route; a run that takes it fails",
                pointer=subject.at(pos, "routes"),
                placement=p.id,
                severity="warning",
            )


def _ordered(first: tuple[str, ...], rest: frozenset[str]) -> list[str]:
    return [*first, *sorted(rest - set(first))]
