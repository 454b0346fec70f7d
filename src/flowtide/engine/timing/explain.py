"""``explain``: how a token's deadline was computed.

The window is resolved once, when the token starts an attempt or parks (see
:mod:`flowtide.engine.timing.deadlines`), and kept on the token with what it was computed from; this
module reads it back and adds where each setting came from: the placement, the node type the
flow document declares, or the node implementation's default.

Once a run has ended its tokens are gone, so its visits are explained from the history instead
(:func:`explain_last_visit`, :func:`explain_windowed_visits`): each ``node_started`` and
``parked`` event records the deadline it resolved, the flow version the run kept gives the
timeout and the anchor (``anchor instant = deadline - timeout``), and the events that follow say
how the visit ended: timed out, moved on by an output, cancelled, or failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from flowtide.engine.errors import EngineError
from flowtide.engine.event_data import payload_of
from flowtide.engine.event_types import (
    EventPayload,
    NodeFailed,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    NodeTimedOut,
    Parked,
    Signalled,
    SubflowFinished,
    TimerFired,
    TokenCancelled,
)
from flowtide.engine.run.marks import armed_timers, fired_timers, window_of
from flowtide.model.durations import format_duration
from flowtide.model.settings import TimeoutAnchor
from flowtide.store.base import ENDED_LIFECYCLES, EventRecord, RunRecord, Store, TokenRecord

if TYPE_CHECKING:
    from flowtide.engine.flows.plan import FlowPlan

__all__ = [
    "Explanation",
    "TimerExplanation",
    "explain_last_visit",
    "explain_token",
    "explain_windowed_visits",
]

_ANCHOR_TEXT = {
    TimeoutAnchor.PARK: "this attempt or park",
    TimeoutAnchor.INSTANCE: "the run's creation",
    TimeoutAnchor.NODE: "the first arrival at the placement",
}


@dataclass(frozen=True, slots=True)
class TimerExplanation:
    index: int
    output: str
    interrupting: bool
    anchor: TimeoutAnchor
    after: timedelta
    due: datetime | None
    """When it fires (None: fired already, or not armed)."""
    fired: bool


@dataclass(frozen=True, slots=True)
class Explanation:
    """Where a token's deadline comes from: ``deadline = anchor_at + timeout``."""

    run_id: str
    token_id: str
    placement: str
    status: str
    deadline: datetime | None
    timeout: timedelta | None
    anchor: TimeoutAnchor
    anchor_at: datetime | None
    resolved_at: datetime | None
    """When the window was resolved (the attempt's start or the park)."""
    timeout_source: str | None
    """``placement``, ``node type``, ``implementation default``, or None (no timeout)."""
    anchor_source: str
    """Where ``timeout_anchor`` was set, or ``default`` (``park``)."""
    node_anchor: datetime | None = None
    """The stored first arrival at the placement (``node`` anchors), if any."""
    timers: tuple[TimerExplanation, ...] = ()
    visit: int | None = None
    """Which visit of the placement is explained (from the history: a run that has ended)."""
    anchor_visit: int | None = None
    """The visit whose arrival set a ``node`` anchor (from the history)."""
    ending: str | None = None
    """How the visit ended: ``timed_out``, ``moved_on``, ``cancelled`` or ``failed`` (None:
    not ended, or not known)."""
    ended_at: datetime | None = None
    ended_by: str | None = None
    """The output it moved on by (``timeout`` for a routed timeout), why it was cancelled, or
    the type of the error it failed with."""
    unknown_defaults: str | None = None
    """The id of the placement's node, when its implementation's default settings are unknown
    where the explanation was made and would count (the flow declares no type for the node and
    no implementation is registered there): its timeout and timers may come from them."""

    def __str__(self) -> str:
        where = f"visit {self.visit}, " if self.visit is not None else ""
        head = f"token {self.token_id} at {self.placement!r} ({where}{self.status})"
        if self.timeout is None and self.unknown_defaults is not None:
            deadline = f"deadline {self.deadline.isoformat()}" if self.deadline else "no timeout"
            lines = [
                f"{head}: {deadline} as far as is known here",
                f"  node {self.unknown_defaults!r} declares no type in the flow and is not "
                "registered here: its implementation's defaults (timeout, timers) are unknown",
            ]
        elif self.timeout is None:
            lines = [f"{head}: no timeout"]
        else:
            anchor = self.anchor.value
            at = self.anchor_at.isoformat() if self.anchor_at else "?"
            if self.anchor_visit is not None:
                at += f", visit {self.anchor_visit}"
            deadline = self.deadline.isoformat() if self.deadline else "not resolved yet"
            lines = [
                f"{head}: deadline {deadline}",
                f"  = anchor {anchor} ({_ANCHOR_TEXT[self.anchor]}: {at})"
                f" + timeout {format_duration(self.timeout)}",
                f"  timeout set by: {self.timeout_source}; anchor set by: {self.anchor_source}",
            ]
            if self.resolved_at is not None:
                lines.append(f"  resolved at {self.resolved_at.isoformat()}")
        if self.ending is not None:
            lines.append(f"  {_ending_text(self.ending, self.ended_at, self.ended_by)}")
        for t in self.timers:
            kind = "interrupting" if t.interrupting else "non-interrupting"
            if t.fired:
                when = "fired"
            elif t.due is not None:
                when = t.due.isoformat()
            else:
                when = "did not fire" if self.ending is not None else "not armed"
            lines.append(
                f"  timer {t.index} ({kind}, output {t.output!r}): anchor {t.anchor.value} + "
                f"{format_duration(t.after)} -> {when}"
            )
        return "\n".join(lines)


def _instant(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def pick_token(
    run_id: str,
    tokens: Sequence[TokenRecord],
    *,
    placement: str | None = None,
    token_id: str | None = None,
) -> TokenRecord:
    """The token to explain: ``token_id``, or the live token at ``placement`` (else the last
    one that was there)."""
    if token_id is not None:
        found = [t for t in tokens if t.id == token_id]
    elif placement is not None:
        found = [t for t in tokens if t.placement == placement and t.status.live]
        if not found:
            found = [t for t in tokens if t.placement == placement]
    else:
        raise EngineError("explain needs a placement or a token_id")
    if not found:
        raise EngineError(f"run {run_id!r} has no token {token_id or 'at ' + str(placement)}")
    return found[-1]


def explain_token(
    plan: FlowPlan, run: RunRecord, token: TokenRecord, node_anchor: datetime | None
) -> Explanation:
    settings = plan.settings.get(token.placement)
    sources = dict(plan.sources.get(token.placement, {}))
    window = window_of(token)
    timeout = settings.timeout if settings is not None else None
    anchor = settings.anchor if settings is not None else TimeoutAnchor.PARK
    unknown = plan.unknown.get(token.placement)
    if window.get("timeout") is not None:
        timeout = timedelta(seconds=window["timeout"])
        anchor = TimeoutAnchor(window["anchor"])
        if unknown is not None:
            # Set nowhere this plan can see: by the node's implementation, where it resolved.
            sources.setdefault("timeout", "implementation default")
            sources.setdefault("timeout_anchor", "implementation default")
            unknown = None
    anchor_at = _instant(window.get("anchor_at"))
    if anchor_at is None and timeout is not None:
        if anchor is TimeoutAnchor.INSTANCE:
            anchor_at = run.created_at
        elif anchor is TimeoutAnchor.NODE:
            anchor_at = node_anchor
    timers: list[TimerExplanation] = []
    armed = armed_timers(token)
    fired = set(fired_timers(token))
    for i, timer in enumerate((settings.timers if settings is not None else None) or ()):
        timers.append(
            TimerExplanation(
                i,
                timer.output,
                timer.interrupting,
                timer.anchor,
                timer.after,
                _instant(armed.get(str(i))),
                i in fired,
            )
        )
    return Explanation(
        run_id=run.id,
        token_id=token.id,
        placement=token.placement,
        status=token.status.value,
        deadline=token.deadline if timeout is not None or unknown is not None else None,
        timeout=timeout,
        anchor=anchor,
        anchor_at=anchor_at,
        resolved_at=_instant(window.get("resolved_at")),
        timeout_source=sources.get("timeout") if timeout is not None else None,
        anchor_source=sources.get("timeout_anchor", "default"),
        node_anchor=node_anchor,
        timers=tuple(timers),
        unknown_defaults=unknown if timeout is None else None,
    )


def _ending_text(ending: str, at: datetime | None, by: str | None) -> str:
    when = at.isoformat() if at else "?"
    if ending == "timed_out":
        if by is None:
            return f"timed out at {when}, with no 'timeout' route: the run failed"
        return f"timed out at {when}, by its {by!r} route"
    if ending == "moved_on":
        return f"moved on at {when} by output {by!r}"
    return f"{ending.replace('_', ' ')} at {when} ({by})"


# -- from the history ------------


@dataclass(slots=True)
class _Visit:
    """One visit of a placement by a token, as the history tells it."""

    token_id: str
    placement: str
    number: int
    arrived_at: datetime
    status: str = "running"
    deadline: datetime | None = None
    resolved_at: datetime | None = None
    ending: str | None = None
    ended_at: datetime | None = None
    ended_by: str | None = None
    fired: set[int] = field(default_factory=set)

    def end(self, ending: str, event: EventRecord, by: str | None) -> None:
        if self.ending is None:
            self.ending, self.ended_at, self.ended_by = ending, event.at, by

    def resolved(self, deadline: str | None, at: datetime) -> None:
        """An attempt's start or a park resolved the window again (``deadline``: as recorded)."""
        self.deadline = _instant(deadline)
        self.resolved_at = at


def _visits(history: Sequence[EventRecord]) -> list[_Visit]:
    """Every visit of a placement that started an attempt, in the order they began."""
    visits: list[_Visit] = []
    current: dict[str, _Visit] = {}  # token id -> the visit it is on
    for e in history:
        if e.token_id is None or e.placement is None:
            continue
        try:
            payload = payload_of(e)
        except ValueError:
            continue  # a record this Flowtide cannot read tells nothing about a visit
        visit = current.get(e.token_id)
        if isinstance(payload, NodeStarted):
            same = visit is not None and (visit.placement, visit.number) == (
                e.placement,
                payload.visit,
            )
            if visit is None or not same or visit.ending is not None:
                visit = _Visit(e.token_id, e.placement, payload.visit, e.at)
                visits.append(visit)
                current[e.token_id] = visit
            visit.status = "running"
            visit.resolved(payload.deadline, e.at)
            continue
        if visit is None or visit.placement != e.placement:
            continue
        _follow(visit, e, payload)
    return visits


def _follow(visit: _Visit, e: EventRecord, payload: EventPayload) -> None:
    """What an event of the visit's token at its placement tells about the visit."""
    match payload:
        case Parked():
            visit.status = "parked"
            visit.resolved(payload.deadline, e.at)
        case NodeFinished() | SubflowFinished():
            visit.end("moved_on", e, payload.output)
        case Signalled(output=str(output)):
            visit.end("moved_on", e, output)
        case TimerFired(purpose="timer"):
            visit.fired.add(payload.index if payload.index is not None else -1)
            if payload.interrupting:
                visit.end("moved_on", e, payload.output)
        case NodeTimedOut():
            visit.deadline = _instant(payload.deadline) or visit.deadline
            visit.end("timed_out", e, "timeout" if payload.routed else None)
        case NodeFailed():
            visit.end("failed", e, payload.error["type"])
        case NodeRetried():
            visit.status = "waiting"  # the failure did not end the visit: it tries again
            visit.ending = visit.ended_at = visit.ended_by = None
        case TokenCancelled():
            visit.end("cancelled", e, payload.reason)


def _explain_visit(
    plan: FlowPlan, run: RunRecord, visit: _Visit, visits: Sequence[_Visit]
) -> Explanation:
    settings = plan.settings.get(visit.placement)
    sources = plan.sources.get(visit.placement, {})
    timeout = settings.timeout if settings is not None else None
    anchor = settings.anchor if settings is not None else TimeoutAnchor.PARK
    unknown = plan.unknown.get(visit.placement) if timeout is None else None
    # (With its node's defaults unknown, the deadline recorded is all that is known of it.)
    deadline = visit.deadline if timeout is not None or unknown is not None else None
    anchor_at: datetime | None = None
    anchor_visit: int | None = None
    if timeout is not None:
        if deadline is not None:
            anchor_at = deadline - timeout
        elif anchor is TimeoutAnchor.INSTANCE:
            anchor_at = run.created_at
        if anchor is TimeoutAnchor.NODE and anchor_at is not None:
            anchor_visit = next(
                (
                    v.number
                    for v in visits
                    if v.placement == visit.placement and v.arrived_at == anchor_at
                ),
                None,
            )
    timers = tuple(
        TimerExplanation(i, t.output, t.interrupting, t.anchor, t.after, None, i in visit.fired)
        for i, t in enumerate((settings.timers if settings is not None else None) or ())
    )
    return Explanation(
        run_id=run.id,
        token_id=visit.token_id,
        placement=visit.placement,
        status=visit.ending or visit.status,
        deadline=deadline,
        timeout=timeout,
        anchor=anchor,
        anchor_at=anchor_at,
        resolved_at=visit.resolved_at if timeout is not None else None,
        timeout_source=sources.get("timeout") if timeout is not None else None,
        anchor_source=sources.get("timeout_anchor", "default"),
        node_anchor=anchor_at if anchor is TimeoutAnchor.NODE else None,
        timers=timers,
        visit=visit.number,
        anchor_visit=anchor_visit,
        ending=visit.ending,
        ended_at=visit.ended_at,
        ended_by=visit.ended_by,
        unknown_defaults=unknown,
    )


def explain_last_visit(
    plan: FlowPlan,
    run: RunRecord,
    history: Sequence[EventRecord],
    *,
    placement: str | None = None,
    token_id: str | None = None,
) -> Explanation:
    """The last visit of ``placement`` (by token ``token_id``, when given), from the history."""
    if placement is None and token_id is None:
        raise EngineError("explain needs a placement or a token_id")
    visits = _visits(history)
    found = [
        v
        for v in visits
        if (placement is None or v.placement == placement)
        and (token_id is None or v.token_id == token_id)
    ]
    if not found:
        what = f"at {placement!r}" if placement is not None else f"of token {token_id!r}"
        raise EngineError(f"run {run.id!r} has no visit {what} in its history")
    return _explain_visit(plan, run, found[-1], visits)


def explain_windowed_visits(
    plan: FlowPlan, run: RunRecord, history: Sequence[EventRecord]
) -> list[Explanation]:
    """The last visit of every placement that had a window (a timeout) or timers, in the order
    those visits began, from the history."""
    visits = _visits(history)
    last: dict[str, _Visit] = {}
    for v in visits:
        settings = plan.settings.get(v.placement)
        windowed = settings is not None and (settings.timeout is not None or settings.timers)
        # (A node whose defaults are unknown here had a window if a deadline was recorded.)
        if windowed or (v.placement in plan.unknown and v.deadline is not None):
            last.pop(v.placement, None)
            last[v.placement] = v
    return [_explain_visit(plan, run, v, visits) for v in last.values()]


async def explain_stored(
    store: Store,
    plan_of: Callable[[RunRecord], Awaitable[FlowPlan]],
    run_id: str,
    *,
    placement: str | None = None,
    token_id: str | None = None,
    live: Mapping[str, TokenRecord] | None = None,
) -> Explanation:
    """:meth:`Engine.explain` from the store (``live``: the tokens of an executor that holds
    the run, newer than the store's)."""
    run = await store.get_run(run_id)
    plan = await plan_of(run)
    if run.lifecycle in ENDED_LIFECYCLES:
        history = await store.history(run_id)
        return explain_last_visit(plan, run, history, placement=placement, token_id=token_id)
    tokens = [(live or {}).get(t.id, t) for t in await store.tokens(run_id)]
    token = pick_token(run_id, tokens, placement=placement, token_id=token_id)
    anchors = {(a.placement, a.item): a.at for a in await store.node_anchors(run_id)}
    return explain_token(plan, run, token, anchors.get((token.placement, None)))


async def explain_stored_run(
    store: Store, plan_of: Callable[[RunRecord], Awaitable[FlowPlan]], run_id: str
) -> list[Explanation]:
    """:meth:`Engine.explain_run` from the store."""
    run = await store.get_run(run_id)
    history = await store.history(run_id)
    plan = await plan_of(run)
    found = explain_windowed_visits(plan, run, history)
    if run.lifecycle in ENDED_LIFECYCLES or not any(e.unknown_defaults for e in found):
        return found
    # A visit still going whose node's defaults are unknown here: its token's window says more.
    tokens = {t.id: t for t in await store.tokens(run_id) if t.status.live}
    anchors = {(a.placement, a.item): a.at for a in await store.node_anchors(run_id)}
    for i, e in enumerate(found):
        token = tokens.get(e.token_id)
        if e.unknown_defaults and token is not None and token.placement == e.placement:
            found[i] = explain_token(plan, run, token, anchors.get((token.placement, None)))
    return found
