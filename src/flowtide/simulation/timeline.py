"""What a played script produced: a :class:`Timeline` of moments, the windows of the placements
that had one, and the run's :class:`Result`.

Every instant is kept as an aware UTC instant and, for reading, as the time since the run
started (:meth:`Timeline.since`); :meth:`Timeline.to_dict` gives both as JSON (ISO 8601 text, and
seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from flowtide.clock import isoformat
from flowtide.engine import ErrorInfo, Lifecycle, ParkedToken, TimerExplanation

__all__ = ["Moment", "Result", "SignalSent", "Timeline", "Window"]


def _iso(at: datetime | None) -> str | None:
    return isoformat(at) if at is not None else None


def _seconds(delta: timedelta | None) -> float | None:
    return delta.total_seconds() if delta is not None else None


@dataclass(frozen=True, slots=True)
class SignalSent:
    """One signal of the script, as it was sent and answered."""

    index: int
    """Its position in the script's ``signals``."""
    at: datetime
    placement: str | None
    key: str | None
    payload: Mapping[str, Any] | None
    output: str | None
    accepted: bool
    reason: str | None = None
    """Why it was refused: ``expired``, ``moved_on``, ``cancelled``, ``unknown``,
    ``not_parked``, ``ambiguous``, ``invalid_output``."""
    message: str | None = None
    """The refusal in the engine's words."""
    closed_at: datetime | None = None
    """When the park it addressed expired, moved on or was cancelled (a refusal)."""
    token_id: str | None = None
    """The token it reached (accepted) or was refused at, when known."""
    reached: str | None = None
    """The placement whose park took it (accepted)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "placement": self.placement,
            "key": self.key,
            "payload": dict(self.payload) if self.payload is not None else None,
            "output": self.output,
            "accepted": self.accepted,
            "reason": self.reason,
            "message": self.message,
            "closed_at": _iso(self.closed_at),
            "token_id": self.token_id,
            "reached": self.reached,
        }


@dataclass(frozen=True, slots=True)
class Moment:
    """One line of the timeline: an event of the run (``kind`` is its kind) or a signal the
    script sent (``kind`` is ``signal``)."""

    at: datetime
    after: timedelta
    """Since the run started."""
    kind: str
    text: str
    """What happened, in plain words."""
    placement: str | None = None
    run: str | None = None
    """For an event of a child run: the subflow placements that lead to it (``review``,
    ``review > check``, ``items[2]``); None for the simulated run itself."""
    attempt: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    """The event's data as the history keeps it (empty for a signal)."""
    signal: SignalSent | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": isoformat(self.at),
            "after_seconds": self.after.total_seconds(),
            "kind": self.kind,
            "run": self.run,
            "placement": self.placement,
            "attempt": self.attempt,
            "text": self.text,
            "data": dict(self.data),
            "signal": self.signal.to_dict() if self.signal is not None else None,
        }


@dataclass(frozen=True, slots=True)
class Window:
    """The last window of a placement: a node's timeout window (``kind`` ``timeout``; ``timers``
    for a node with escalation timers only: from the engine's ``explain``) or a wait (``kind``
    ``wait``)."""

    placement: str
    kind: Literal["timeout", "timers", "wait"]
    deadline: datetime | None
    """When the window ends (a wait: when it is due)."""
    duration: timedelta | None
    """The timeout, or how long the wait waits (None for a wait until an instant)."""
    anchor: str
    """``park``, ``instance`` or ``node`` for a timeout; ``arrival`` for a wait."""
    anchor_at: datetime | None
    source: str | None
    """Where the timeout (or the wait) was set: ``placement``, ``node type``, ``implementation
    default``."""
    anchor_source: str | None
    """Where the anchor was set, or ``default``."""
    visit: int | None = None
    anchor_visit: int | None = None
    """For a ``node`` anchor: the visit whose arrival set it."""
    ending: str | None = None
    """``timed_out``, ``moved_on``, ``cancelled``, ``failed`` or, for a wait, ``elapsed``."""
    ended_at: datetime | None = None
    ended_by: str | None = None
    run: str | None = None
    timers: tuple[TimerExplanation, ...] = ()

    def to_dict(self, start: datetime) -> dict[str, Any]:
        def after(at: datetime | None) -> float | None:
            return (at - start).total_seconds() if at is not None else None

        return {
            "run": self.run,
            "placement": self.placement,
            "kind": self.kind,
            "deadline": _iso(self.deadline),
            "deadline_after_seconds": after(self.deadline),
            "duration_seconds": _seconds(self.duration),
            "anchor": self.anchor,
            "anchor_at": _iso(self.anchor_at),
            "anchor_after_seconds": after(self.anchor_at),
            "source": self.source,
            "anchor_source": self.anchor_source,
            "visit": self.visit,
            "anchor_visit": self.anchor_visit,
            "ending": self.ending,
            "ended_at": _iso(self.ended_at),
            "ended_after_seconds": after(self.ended_at),
            "ended_by": self.ended_by,
            "timers": [
                {
                    "index": t.index,
                    "output": t.output,
                    "interrupting": t.interrupting,
                    "anchor": t.anchor.value,
                    "after_seconds": t.after.total_seconds(),
                    "fired": t.fired,
                }
                for t in self.timers
            ],
        }


@dataclass(frozen=True, slots=True)
class Result:
    """Where the run stood when the clock stopped: ended (``ended_at``), or still going."""

    run_id: str
    lifecycle: Lifecycle
    outcome: str | None
    state: Mapping[str, Any]
    started_at: datetime
    stopped_at: datetime
    """When the clock stopped: the run's end, or the script's ``until``."""
    ended_at: datetime | None = None
    errors: tuple[ErrorInfo, ...] = ()
    parked: tuple[ParkedToken, ...] = ()
    terminals: tuple[str, ...] = ()
    busy: bool = False
    """The clock was stopped early: the run kept on firing timers."""

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def to_dict(self) -> dict[str, Any]:
        def after(at: datetime | None) -> float | None:
            return (at - self.started_at).total_seconds() if at is not None else None

        return {
            "run_id": self.run_id,
            "lifecycle": self.lifecycle.value,
            "outcome": self.outcome,
            "state": dict(self.state),
            "errors": [e.to_dict() for e in self.errors],
            "parked": [p.to_dict() for p in self.parked],
            "terminals": list(self.terminals),
            "started_at": isoformat(self.started_at),
            "ended_at": _iso(self.ended_at),
            "ended_after_seconds": after(self.ended_at),
            "stopped_at": isoformat(self.stopped_at),
            "stopped_after_seconds": after(self.stopped_at),
            "busy": self.busy,
        }


@dataclass(frozen=True, slots=True)
class Timeline:
    """A played script: what happened when, the windows, and the result."""

    flow: str
    """The id of the flow played."""
    start: datetime
    moments: tuple[Moment, ...]
    windows: tuple[Window, ...]
    result: Result

    def since(self, at: datetime) -> timedelta:
        return at - self.start

    @property
    def signals(self) -> tuple[SignalSent, ...]:
        """The script's signals, as they were answered, in the order they were sent."""
        return tuple(m.signal for m in self.moments if m.signal is not None)

    def to_dict(self) -> dict[str, Any]:
        """``{"timeline": [...], "windows": [...], "result": {...}}``."""
        return {
            "timeline": [m.to_dict() for m in self.moments],
            "windows": [w.to_dict(self.start) for w in self.windows],
            "result": self.result.to_dict(),
        }
