"""Resolving windows and escalation timers to absolute instants.

Every deadline and timer instant the engine uses for a node goes through this module: a node's
window when a token starts an attempt or parks (:func:`resolve_window`), and each escalation
timer's instant (:func:`timer_due`). The result is stored (on the token, or as a due instant), so
whoever fires it later (the node's own timer, the sweeper) needs no anchor logic.

Anchors:

* ``park``: this attempt's start or this park (``now``): rearmed every attempt and every park;
* ``instance``: the run's creation;
* ``node``: the first arrival at the placement in this run (per scatter item inside a scatter),
  stored once and reused on re-entry and across retries until released.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.errors import EngineError
from flowtide.model.durations import parse_duration
from flowtide.model.settings import NodeSettings, TimeoutAnchor, Timer

__all__ = [
    "Window",
    "attempt_deadline",
    "needs_node_anchor",
    "resolve_window",
    "run_deadline",
    "timer_due",
]


@dataclass(frozen=True, slots=True)
class Window:
    """A resolved window: ``deadline = anchor_at + timeout`` (None: no timeout)."""

    deadline: datetime | None
    anchor: TimeoutAnchor
    anchor_at: datetime | None
    timeout: timedelta | None
    resolved_at: datetime

    def to_data(self) -> dict[str, Any]:
        """The JSON form kept on the token (for ``explain``)."""
        return {
            "anchor": self.anchor.value,
            "anchor_at": isoformat(self.anchor_at) if self.anchor_at else None,
            "timeout": self.timeout.total_seconds() if self.timeout is not None else None,
            "deadline": isoformat(self.deadline) if self.deadline else None,
            "resolved_at": isoformat(self.resolved_at),
        }


def _anchor_instant(
    anchor: TimeoutAnchor, *, now: datetime, run_created_at: datetime, node_anchor: datetime | None
) -> datetime:
    if anchor is TimeoutAnchor.INSTANCE:
        return run_created_at
    if anchor is TimeoutAnchor.NODE and node_anchor is not None:
        return node_anchor
    return now


def resolve_window(
    settings: NodeSettings,
    *,
    now: datetime,
    run_created_at: datetime,
    node_anchor: datetime | None = None,
) -> Window:
    """The window of an attempt starting, or a token parking, at ``now``.

    ``node_anchor`` is the stored first arrival at the placement (the caller reads or creates
    it: see :func:`needs_node_anchor`); with anchor ``node`` and none given, ``now`` is the
    first arrival.
    """
    anchor = settings.anchor
    if settings.timeout is None:
        return Window(None, anchor, None, None, now)
    base = _anchor_instant(anchor, now=now, run_created_at=run_created_at, node_anchor=node_anchor)
    return Window(base + settings.timeout, anchor, base, settings.timeout, now)


def attempt_deadline(
    settings: NodeSettings,
    *,
    now: datetime,
    run_created_at: datetime,
    node_anchor: datetime | None = None,
) -> datetime | None:
    """The end of the window (None when the node has no timeout): :func:`resolve_window`."""
    return resolve_window(
        settings, now=now, run_created_at=run_created_at, node_anchor=node_anchor
    ).deadline


def timer_due(
    timer: Timer, *, now: datetime, run_created_at: datetime, node_anchor: datetime | None
) -> datetime:
    """The instant an escalation timer fires: its own anchor + ``after``."""
    base = _anchor_instant(
        timer.anchor, now=now, run_created_at=run_created_at, node_anchor=node_anchor
    )
    return base + timer.after


def needs_node_anchor(settings: NodeSettings) -> bool:
    """True when the placement's window or one of its timers is anchored at the first arrival."""
    if settings.timeout is not None and settings.anchor is TimeoutAnchor.NODE:
        return True
    return any(t.anchor is TimeoutAnchor.NODE for t in settings.timers or ())


def run_deadline(value: timedelta | datetime | str | int | None, now: datetime) -> datetime | None:
    """A whole run's deadline: ``value`` as a duration from ``now`` (a ``timedelta``, ISO 8601
    text, milliseconds) or an absolute instant (with a time zone); None: no deadline."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise EngineError(f"deadline {value!r} needs a time zone")
        return value
    return now + parse_duration(value)
