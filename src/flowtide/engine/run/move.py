"""A move of a token along an output, as values: what a part asks the executor's router to
commit (:class:`Move`) and what the move came to (:class:`Moved`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from flowtide.engine.event_types import Moving
from flowtide.model.placements import AnyPlacement
from flowtide.store.base import DueEntry, EventRecord, RequestAnswer, SignalAnswer, TokenRecord

MoveEvent = Callable[[list[str] | None], Moving]
"""The payload of a move's event given where the token goes (None: its output routes nowhere).
(A builder rather than a payload: the payload is made once, with ``to``, not copied.)"""

StateUpdate = Callable[[], tuple[dict[str, Any], list[str]]]
"""A step's state change: applied in memory once the step goes ahead, it gives what the commit
writes and deletes (see the executor's ``commit``)."""


class Move(NamedTuple):
    """Move ``token`` from ``placement`` along ``output``, and what else goes in the move's one
    commit. (A tuple, immutable like a frozen dataclass: one is made per step, and a tuple is
    made in a third of the time.)"""

    token: TokenRecord
    placement: AnyPlacement
    output: str
    event: MoveEvent
    """The move's event payload, once its targets are known."""
    update: StateUpdate | None = None
    """The state change the move commits (an attempt's, a signal's payload)."""
    extra: Sequence[TokenRecord] = ()
    """Other tokens the commit writes (a join's arrivals and losers)."""
    extra_events: Sequence[EventRecord] = ()
    due_cleared: Sequence[str] = ()
    """Tokens whose due entries go (beyond the moved token's own)."""
    answers: Sequence[SignalAnswer] = ()
    """Answers to the idempotency keys of a signal that moves the token."""
    requests: Sequence[RequestAnswer] = ()
    """Answers to the signal requests the move applies."""
    fired: Sequence[DueEntry] = ()
    """Due entries the move fires (removed by its commit)."""


@dataclass(frozen=True, slots=True)
class Moved:
    """What a move along an output came to."""

    committed: bool
    """Whether the move was committed (not: the run ended first, or the output routes nowhere)."""
    next: TokenRecord | None = None
    """The moved token to go on with (None: it arrived at a join, ended, or was not moved)."""
    joins_due: bool = False
    """A join group may fire now (a branch moved out of its reach): the run's joins are
    evaluated next, in the same step (the router itself does not fire joins)."""


NOT_MOVED = Moved(False)
