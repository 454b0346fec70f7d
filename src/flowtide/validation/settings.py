"""Settings checks, on the effective settings: the node type's defaults overlaid by the placement's.

Value checks (positive timeouts, ISO 8601 durations, known anchors) belong to the model and come
out of :mod:`flowtide.validation.structure`; these are the checks that need the graph or the node.
"""

from __future__ import annotations

from collections.abc import Iterator

from flowtide.errors import Problem
from flowtide.model.durations import format_duration
from flowtide.model.nodes import NodeType
from flowtide.model.placements import RESERVED_OUTPUTS, TIMEOUT_OUTPUT, AnyPlacement, Task
from flowtide.model.settings import TimeoutAnchor
from flowtide.validation.pointers import pointer
from flowtide.validation.subject import Subject


def _where(subject: Subject, pos: int, p: AnyPlacement, name: str, *parts: object) -> str:
    """Where setting ``name`` of ``p`` comes from: the placement, or its node type's defaults."""
    own = p.node_settings()
    if own is not None and getattr(own, name) is not None:
        return subject.at(pos, "settings", name, *parts)
    declared = subject.node_of(p)
    if declared is not None and declared.pointer is not None:
        return declared.pointer + pointer("settings", name, *parts)
    return subject.at(pos)


def release_outputs(subject: Subject) -> Iterator[Problem]:
    """``release_on`` names outputs the node or the placement can take."""
    for position, declared in enumerate(subject.flow.node_types):
        for item, output in _foreign(declared.settings.release_on, _node_outputs(declared)):
            yield Problem(
                f"release_on names output {output!r}, which node {declared.id!r} does not "
                f"declare (outputs: {', '.join(declared.outputs)})",
                pointer=subject.node_type_at(position, "settings", "release_on", item),
            )
    for pos, p in subject.positions():
        own = p.node_settings()
        if own is not None and own.release_on is not None:
            allowed = subject.outputs(p)
            if allowed is None:
                continue
            for item, output in _foreign(own.release_on, allowed):
                yield Problem(
                    f"release_on names output {output!r}, which this placement cannot take "
                    f"(outputs: {', '.join(sorted(allowed))})",
                    pointer=subject.at(pos, "settings", "release_on", item),
                    placement=p.id,
                )
            continue
        found = subject.node_of(p)
        if found is None or found.pointer is not None:
            continue  # a node type of the document is checked once, above
        for _item, output in _foreign(found.type.settings.release_on, _node_outputs(found.type)):
            yield Problem(
                f"the default release_on of node {found.type.id!r} names output {output!r}, "
                f"which the node does not declare (outputs: {', '.join(found.type.outputs)})",
                pointer=subject.at(pos, "node"),
                placement=p.id,
            )


def _node_outputs(declared: NodeType) -> frozenset[str]:
    timers = declared.settings.timers or ()
    return frozenset(declared.outputs) | RESERVED_OUTPUTS | {t.output for t in timers}


def _foreign(release: tuple[str, ...] | None, allowed: frozenset[str]) -> Iterator[tuple[int, str]]:
    for item, output in enumerate(release or ()):
        if output not in allowed:
            yield item, output


def anchors(subject: Subject) -> Iterator[Problem]:
    """Warnings for settings that only mean something with a ``node`` timeout anchor."""
    for pos, p in subject.positions():
        settings = subject.effective_settings(p)
        if settings.anchor is TimeoutAnchor.NODE:
            if settings.timeout is None and not settings.timers:
                yield Problem(
                    "timeout_anchor 'node' has no effect: there is no timeout and no timer",
                    pointer=_where(subject, pos, p, "timeout_anchor"),
                    placement=p.id,
                    severity="warning",
                )
            continue
        if settings.release_on:
            yield Problem(
                "release_on has no effect: the timeout anchor is "
                f"{settings.anchor.value!r}, not 'node'",
                pointer=_where(subject, pos, p, "release_on"),
                placement=p.id,
                severity="warning",
            )
        for item, timer in enumerate(settings.timers or ()):
            if timer.anchor is TimeoutAnchor.NODE:
                yield Problem(
                    f"timer {item} is anchored at 'node', but the placement's "
                    f"timeout anchor is {settings.anchor.value!r}: the node anchor is never set",
                    pointer=_where(subject, pos, p, "timers", item, "anchor"),
                    placement=p.id,
                    severity="warning",
                )


def timer_routes(subject: Subject) -> Iterator[Problem]:
    """Every timer's output has a route."""
    for pos, p in subject.positions():
        routes = p.route_map()
        own = p.node_settings()
        from_placement = own is not None and own.timers is not None
        for item, timer in enumerate(subject.effective_settings(p).timers or ()):
            if timer.output not in routes:
                where = (
                    subject.at(pos, "settings", "timers", item, "output")
                    if from_placement
                    else subject.at(pos, "routes")
                )
                yield Problem(
                    f"timer {item} takes output {timer.output!r}, which has no route",
                    pointer=where,
                    placement=p.id,
                )


def timeout_routes(subject: Subject) -> Iterator[Problem]:
    """A warning for a ``timeout`` route on a placement that has no timeout."""
    for pos, p in subject.positions():
        if TIMEOUT_OUTPUT not in p.route_map() or not p.has_settings:
            continue
        if isinstance(p, Task) and subject.node_of(p) is None:
            continue  # the node's defaults are unknown
        if subject.effective_settings(p).timeout is None:
            yield Problem(
                "route 'timeout' is never taken: neither the placement nor its node sets a timeout",
                pointer=subject.at(pos, "routes", TIMEOUT_OUTPUT),
                placement=p.id,
                severity="warning",
            )


def timers_before_timeout(subject: Subject) -> Iterator[Problem]:
    """A warning for a timer the timeout always beats (same anchor, not earlier)."""
    for pos, p in subject.positions():
        settings = subject.effective_settings(p)
        if settings.timeout is None:
            continue
        for item, timer in enumerate(settings.timers or ()):
            if timer.anchor is settings.anchor and timer.after >= settings.timeout:
                yield Problem(
                    f"timer {item} never fires: it is due {format_duration(timer.after)} after "
                    f"the {timer.anchor.value!r} anchor, but the timeout ends the window "
                    f"{format_duration(settings.timeout)} after it",
                    pointer=_where(subject, pos, p, "timers", item, "after"),
                    placement=p.id,
                    severity="warning",
                )
