"""Parked and waiting tokens moved from outside the run, decided on the run's view without I/O:
whether a due entry still moves its token when it comes, and which parked token a signal moves
(or why it is refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.requests._signals import invalid_output, refusal
from flowtide.engine.run.due import DueKind, DuePurpose
from flowtide.engine.run.marks import Waiting, timer_armed, waiting_for
from flowtide.store.base import ParkRecord, StoreConflict, TokenRecord, TokenStatus

S = TokenStatus
AT_NODE = frozenset({S.RUNNING, S.PARKED, S.WAITING})
"""Statuses of a token that is still at its placement (escalation timers may fire)."""


def due_applies(token: TokenRecord, purpose: DuePurpose | None, when: datetime) -> bool:
    """Whether a due entry of ``token`` for ``purpose`` at ``when`` moves it now; False if the
    entry is stale (the token moved on, or waits again for a later instant) or of a purpose
    the token's own entries never have (a signal request's, the run deadline's: the run's)."""
    if purpose is None:
        return False
    kind = purpose.kind
    if kind is DueKind.RESUME:
        return token.status is S.WAITING and (token.due is None or token.due <= when)
    if kind is DueKind.TIMEOUT:
        # The token's own deadline must have passed by the entry's instant; an entry fired late
        # (or deferred by an engine that could not fire it) still counts. A parked token, or
        # one waiting out a retry's backoff past its window's end.
        backoff = token.status is S.WAITING and waiting_for(token) is Waiting.RETRY
        return (
            (token.status is S.PARKED or backoff)
            and token.deadline is not None
            and token.deadline <= when
        )
    if kind is DueKind.TIMER:
        return (
            token.visit == purpose.visit
            and token.status in AT_NODE
            and timer_armed(token, purpose.index)
        )
    return False


def signalled_token(
    plan: FlowPlan,
    tokens: Mapping[str, TokenRecord],
    parks: Mapping[str, ParkRecord],
    closed: Mapping[str, ParkRecord],
    park: ParkRecord,
    output: str | None,
    at: datetime,
) -> TokenRecord:
    """The parked token a signal for ``park`` at ``at`` moves (along ``output``, if given),
    given the run's live ``tokens``, its open ``parks`` (by token id) and the parks it closed
    (by park id). Raises why it cannot: a refusal
    (:class:`~flowtide.engine.SignalRefused`), or a conflict if the view never had that park."""
    token = tokens.get(park.token_id)
    mine = parks.get(park.token_id)
    if token is None or token.status is not S.PARKED or mine is None or mine.id != park.id:
        known = park_record(parks, closed, park.id)
        if known is None:
            # This view never had that park open: it was read from the store before or after
            # the park's step, not with it. Look again.
            raise StoreConflict(f"park {park.id!r} is not as this view of the run has it")
        raise refusal(known, at, live=token)
    if token.deadline is not None and token.deadline <= at:
        raise refusal(mine, at)
    if output is not None:
        p = plan.placements[token.placement]
        invalid = invalid_output(plan, p, output, token.id, park)
        if invalid is not None:
            raise invalid
    return token


def park_record(
    parks: Mapping[str, ParkRecord], closed: Mapping[str, ParkRecord], park_id: str
) -> ParkRecord | None:
    """Park ``park_id`` as the run's view knows it (open, or closed by it), else None."""
    for park in parks.values():
        if park.id == park_id:
            return park
    return closed.get(park_id)
