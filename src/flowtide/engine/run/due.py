"""What a due entry falls due for: typed in the engine, text only where the store keeps it.

The store keeps a due entry's purpose as text (:attr:`flowtide.store.DueEntry.purpose`); the
engine writes it with :meth:`DuePurpose.format` and reads it once with :func:`parse_purpose`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from flowtide.store.base import DueEntry


class DueKind(StrEnum):
    """The kinds of due instant a run has (their text in the store)."""

    RESUME = ""
    """A wait's instant, or the end of a retry's backoff: the waiting token is ready again."""
    TIMEOUT = "timeout"
    """A parked token's deadline (or a window's end during a retry's backoff)."""
    TIMER = "timer"
    """An escalation timer of one visit of a token (``timer:<visit>:<index>`` in the store)."""
    SIGNAL = "signal"
    """A request another engine recorded for the run (the entry's token id is the request's)."""
    DEADLINE = "deadline"
    """The run's deadline (the entry's token id is the run's)."""
    CHILD_ENDED = "child_ended"
    """A subflow's child run has ended (set by the child's end on its parent's token:
    ``child_ended:<child run id>`` in the store)."""


@dataclass(frozen=True, slots=True)
class DuePurpose:
    """What one due entry falls due for: its kind, for a timer its visit and index, for a
    child's end the child run's id."""

    kind: DueKind
    visit: int = 0
    index: int = 0
    child: str = ""

    @classmethod
    def timer(cls, visit: int, index: int) -> DuePurpose:
        return cls(DueKind.TIMER, visit, index)

    @classmethod
    def child_ended(cls, child_run_id: str) -> DuePurpose:
        return cls(DueKind.CHILD_ENDED, child=child_run_id)

    def format(self) -> str:
        """The purpose as the store keeps it."""
        if self.kind is DueKind.TIMER:
            return f"timer:{self.visit}:{self.index}"
        if self.child:
            return f"{self.kind.value}:{self.child}"
        return self.kind.value

    def entry(self, when: datetime, run_id: str, token_id: str) -> DueEntry:
        """The due entry of this purpose for ``token_id`` of ``run_id`` at ``when``."""
        return DueEntry(when, run_id, token_id, self.format())


RESUME = DuePurpose(DueKind.RESUME)
TIMEOUT = DuePurpose(DueKind.TIMEOUT)
SIGNAL = DuePurpose(DueKind.SIGNAL)
DEADLINE = DuePurpose(DueKind.DEADLINE)
_SIMPLE = {p.format(): p for p in (RESUME, TIMEOUT, SIGNAL, DEADLINE)}


def parse_purpose(text: str) -> DuePurpose | None:
    """The purpose the store keeps as ``text``; None if Flowtide never writes it (an entry with
    such a purpose moves nothing)."""
    simple = _SIMPLE.get(text)
    if simple is not None:
        return simple
    head, _, rest = text.partition(":")
    if head == DueKind.CHILD_ENDED.value:
        # (Bare, as an earlier Flowtide wrote it: it names no child, and wakes the run only.)
        return DuePurpose.child_ended(rest)
    visit, _, index = rest.partition(":")
    if head != DueKind.TIMER.value or not (_number(visit) and _number(index)):
        return None
    return DuePurpose.timer(int(visit), int(index))


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()
