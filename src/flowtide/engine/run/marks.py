"""What a token carries from one step to the next (:attr:`TokenRecord.data
<flowtide.store.TokenRecord.data>`, a JSON object in the store), read and written here only,
typed: what it waits for, its wake-up, the signal that woke it, its window and escalation timers,
an interrupting timer that fired, and its side-branch mark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.timing.deadlines import Window
from flowtide.store.base import TokenRecord

SIDE = "side"
"""Its branch was started by a non-interrupting timer (a reminder's), or split from one that
was. Such a branch ends at a terminal like any other, listed in the run's ``terminals``, but
never sets the run's outcome: the branch the run started does."""
_WAITING = "purpose"  # what a waiting token waits for (see Waiting)
_BACKOFF = "backoff"  # a retry's backoff, in seconds (the next one grows from it)
_DUE = "fired"  # the wait or backoff is over: the token is ready to go on
_SIGNAL = "signal"  # the payload of the signal that woke the token (its node runs again)
_INTERRUPT = "interrupt"  # an interrupting timer fired while its node ran (see FiredTimer)
_TIMERS = "timers"  # armed escalation timers: index (as text) -> instant
_FIRED_TIMERS = "fired_timers"  # indexes of the timers fired during this visit
_WINDOW = "window"  # the resolved window (for explain)


class Waiting(StrEnum):
    """What a waiting token waits for."""

    WAIT = "wait"
    """A wait placement's instant."""
    RETRY = "retry"
    """The end of a retry's backoff."""


@dataclass(frozen=True, slots=True)
class FiredTimer:
    """An escalation timer that fired: the output it takes, its index, its anchor."""

    output: str
    index: int
    anchor: str

    def to_data(self) -> dict[str, Any]:
        return {"output": self.output, "index": self.index, "anchor": self.anchor}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FiredTimer:
        return cls(str(data["output"]), int(data["index"]), str(data["anchor"]))


def branch_marks(token: TokenRecord) -> dict[str, Any]:
    """What a token's data keeps through its moves, retries and waits: its :data:`SIDE` mark."""
    return {SIDE: True} if token.data.get(SIDE) else {}


def sets_outcome(token: TokenRecord) -> bool:
    """Whether a terminal this token reaches sets the run's outcome (see :data:`SIDE`)."""
    return not token.data.get(SIDE)


def mark_side(token: TokenRecord) -> None:
    """``token`` is a side branch (see :data:`SIDE`)."""
    token.data[SIDE] = True


def inherit(token: TokenRecord, parent: TokenRecord) -> None:
    """``token`` is split from ``parent``: it carries ``parent``'s branch marks."""
    token.data.update(branch_marks(parent))


def carries_marks(token: TokenRecord) -> bool:
    """Whether ``token`` carries anything (then it may have due entries to drop when it moves)."""
    return bool(token.data)


def leave(token: TokenRecord) -> None:
    """``token`` leaves its placement: only its branch marks go with it."""
    token.data = branch_marks(token)


def wait_for(token: TokenRecord, what: Waiting, backoff: timedelta | None = None) -> None:
    """``token`` waits for ``what`` (a retry's for its ``backoff``): all else it carried goes."""
    data: dict[str, Any] = {_WAITING: what.value}
    if backoff is not None:
        data[_BACKOFF] = backoff.total_seconds()
    token.data = {**data, **branch_marks(token)}


def waiting_for(token: TokenRecord) -> Waiting | None:
    """What ``token`` waits for (None: it is not waiting, or waits for nothing known)."""
    found = token.data.get(_WAITING)
    return Waiting(found) if found in ("wait", "retry") else None


def last_backoff(token: TokenRecord) -> timedelta | None:
    """The backoff ``token`` waited out before its attempt (None: none)."""
    seconds = token.data.get(_BACKOFF)
    return timedelta(seconds=seconds) if seconds is not None else None


def mark_due(token: TokenRecord) -> None:
    """``token``'s wait (or backoff) is over: it goes on (a wait by default)."""
    token.data[_DUE] = token.data.get(_WAITING, Waiting.WAIT.value)


def is_due(token: TokenRecord, what: Waiting) -> bool:
    """Whether ``token``'s wait for ``what`` is over."""
    return bool(token.data.get(_DUE) == what.value)


def take_due(token: TokenRecord) -> Waiting | None:
    """What ``token`` waited for if that is over (the mark goes); else None."""
    found = token.data.pop(_DUE, None)
    return Waiting(found) if found in ("wait", "retry") else None


def wake(token: TokenRecord, payload: Mapping[str, Any]) -> None:
    """A signal wakes ``token`` with ``payload``: its node runs again. The timers it fired
    during this visit stay fired."""
    kept = (_FIRED_TIMERS, SIDE)
    token.data = {k: v for k, v in token.data.items() if k in kept}
    token.data[_SIGNAL] = dict(payload)


def signal_of(token: TokenRecord) -> Any:
    """The payload of the signal that woke ``token`` (None: none). It stays until the attempt
    ends: an attempt run again after a crash sees the signal that resumed it."""
    return token.data.get(_SIGNAL)


def drop_signal(token: TokenRecord) -> None:
    """A new park waits for a new signal."""
    token.data.pop(_SIGNAL, None)


def interrupt(token: TokenRecord, timer: FiredTimer) -> None:
    """An interrupting timer fired while ``token``'s node runs: it moves when the node stops."""
    token.data[_INTERRUPT] = timer.to_data()


def interrupted(token: TokenRecord) -> bool:
    return _INTERRUPT in token.data


def take_interrupt(token: TokenRecord) -> FiredTimer | None:
    """The interrupting timer that fired for ``token``, if any (the mark goes)."""
    found = token.data.pop(_INTERRUPT, None)
    return FiredTimer.from_data(found) if found is not None else None


def set_window(token: TokenRecord, window: Window) -> None:
    token.data[_WINDOW] = window.to_data()


def fired_timers(token: TokenRecord) -> Sequence[int]:
    """The indexes of the escalation timers fired during ``token``'s visit."""
    found: Sequence[int] = token.data.get(_FIRED_TIMERS, ())
    return found


def arm_timers(token: TokenRecord, armed: Mapping[int, datetime]) -> None:
    """``token``'s armed escalation timers: index -> instant."""
    token.data[_TIMERS] = {str(i): isoformat(when) for i, when in armed.items()}


def timer_armed(token: TokenRecord, index: int) -> bool:
    return str(index) in armed_timers(token)


def timer_fired(token: TokenRecord, index: int) -> None:
    """Escalation timer ``index`` fired: no longer armed, and not armed again this visit."""
    armed = dict(armed_timers(token))
    armed.pop(str(index), None)
    token.data[_TIMERS] = armed
    token.data[_FIRED_TIMERS] = [*fired_timers(token), index]


def window_of(token: TokenRecord) -> Mapping[str, Any]:
    """The window resolved for ``token`` as :meth:`Window.to_data` put it (empty: none)."""
    found: Mapping[str, Any] = token.data.get(_WINDOW) or {}
    return found


def armed_timers(token: TokenRecord) -> Mapping[str, str]:
    """``token``'s armed escalation timers: index (as text) -> instant (ISO 8601)."""
    found: Mapping[str, str] = token.data.get(_TIMERS, {})
    return found
