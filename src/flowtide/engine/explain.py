"""``explain``: how a token's deadline was computed (DESIGN §8).

The window is resolved once, when the token starts an attempt or parks (see
:mod:`flowtide.engine.deadlines`), and kept on the token with what it was computed from; this
module reads it back and adds where each setting came from: the placement, the node type the
flow document declares, or the node implementation's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from flowtide.model.durations import format_duration
from flowtide.model.settings import TimeoutAnchor
from flowtide.store.base import RunRecord, TokenRecord

if TYPE_CHECKING:
    from flowtide.engine.plan import FlowPlan

__all__ = ["Explanation", "TimerExplanation", "explain_token"]

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

    def __str__(self) -> str:
        head = f"token {self.token_id} at {self.placement!r} ({self.status})"
        if self.timeout is None:
            lines = [f"{head}: no timeout"]
        else:
            anchor = self.anchor.value
            at = self.anchor_at.isoformat() if self.anchor_at else "?"
            deadline = self.deadline.isoformat() if self.deadline else "not resolved yet"
            lines = [
                f"{head}: deadline {deadline}",
                f"  = anchor {anchor} ({_ANCHOR_TEXT[self.anchor]}: {at})"
                f" + timeout {format_duration(self.timeout)}",
                f"  timeout set by: {self.timeout_source}; anchor set by: {self.anchor_source}",
            ]
            if self.resolved_at is not None:
                lines.append(f"  resolved at {self.resolved_at.isoformat()}")
        for t in self.timers:
            kind = "interrupting" if t.interrupting else "non-interrupting"
            when = "fired" if t.fired else (t.due.isoformat() if t.due else "not armed")
            lines.append(
                f"  timer {t.index} ({kind}, output {t.output!r}): anchor {t.anchor.value} + "
                f"{format_duration(t.after)} -> {when}"
            )
        return "\n".join(lines)


def _instant(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def explain_token(
    plan: FlowPlan, run: RunRecord, token: TokenRecord, node_anchor: datetime | None
) -> Explanation:
    settings = plan.settings.get(token.placement)
    sources = plan.sources.get(token.placement, {})
    window = token.data.get("window") or {}
    timeout = settings.timeout if settings is not None else None
    anchor = settings.anchor if settings is not None else TimeoutAnchor.PARK
    if window.get("timeout") is not None:
        timeout = timedelta(seconds=window["timeout"])
        anchor = TimeoutAnchor(window["anchor"])
    anchor_at = _instant(window.get("anchor_at"))
    if anchor_at is None and timeout is not None:
        if anchor is TimeoutAnchor.INSTANCE:
            anchor_at = run.created_at
        elif anchor is TimeoutAnchor.NODE:
            anchor_at = node_anchor
    timers: list[TimerExplanation] = []
    armed = token.data.get("timers", {})
    fired = set(token.data.get("fired_timers", ()))
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
        deadline=token.deadline if timeout is not None else None,
        timeout=timeout,
        anchor=anchor,
        anchor_at=anchor_at,
        resolved_at=_instant(window.get("resolved_at")),
        timeout_source=sources.get("timeout") if timeout is not None else None,
        anchor_source=sources.get("timeout_anchor", "default"),
        node_anchor=node_anchor,
        timers=tuple(timers),
    )
