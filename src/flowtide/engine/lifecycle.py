"""The run lifecycle::

    pending -> running <-> parked -> completed | failed | cancelled | timed_out

Terminal states accept no transition at all: :func:`transition` raises :class:`LifecycleError`.
"""

from __future__ import annotations

from enum import StrEnum

from flowtide.engine.errors import LifecycleError


class Lifecycle(StrEnum):
    """The state of a run; :attr:`terminal` states (completed, failed, cancelled, timed out)
    are final."""

    PENDING = "pending"
    RUNNING = "running"
    PARKED = "parked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {Lifecycle.COMPLETED, Lifecycle.FAILED, Lifecycle.CANCELLED, Lifecycle.TIMED_OUT}
)
_ENDS = frozenset(_TERMINAL)
_ALLOWED: dict[Lifecycle, frozenset[Lifecycle]] = {
    # A pending run can be cancelled, time out or fail (a bad start) before it runs anything.
    Lifecycle.PENDING: frozenset({Lifecycle.RUNNING}) | _ENDS - {Lifecycle.COMPLETED},
    Lifecycle.RUNNING: frozenset({Lifecycle.PARKED}) | _ENDS,
    Lifecycle.PARKED: frozenset({Lifecycle.RUNNING}) | _ENDS - {Lifecycle.COMPLETED},
}


def transition(current: Lifecycle | str, wanted: Lifecycle | str) -> Lifecycle:
    """``wanted`` if the lifecycle may go there from ``current``; else :class:`LifecycleError`."""
    # Members and their values hash and compare alike: one lookup each, no Lifecycle() call.
    cur, new = _MEMBERS.get(current), _MEMBERS.get(wanted)
    if cur is None or new is None:
        cur, new = Lifecycle(current), Lifecycle(wanted)  # (raises ValueError, as it did)
    if new not in _ALLOWED.get(cur, frozenset()):
        raise LifecycleError(cur.value, new.value)
    return new


_MEMBERS: dict[str, Lifecycle] = {m.value: m for m in Lifecycle}
