"""Finding the park a signal addresses (by run and placement, token, or correlation key), or
why no park can take it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flowtide.engine.errors import EngineError, RefusalReason, SignalRefused
from flowtide.engine.requests._signals import refusal
from flowtide.engine.run.parking import park_record
from flowtide.engine.run.view import RunView
from flowtide.store.base import (
    LIVE_TOKEN_STATUSES,
    ParkRecord,
    ParkStatus,
    Store,
    TokenStatus,
)


async def find_park(
    store: Store,
    held: RunView | None,
    now: datetime,
    run_id: str | None,
    placement: str | None,
    key: str | None,
    token_id: str | None,
) -> ParkRecord:
    """The park a signal addresses, or the refusal (``held``: the run's view, if this engine
    holds the run)."""
    if key is None and run_id is None:
        raise EngineError("signal needs a run_id (with placement or token_id) or a key")
    if key is None and placement is None and token_id is None:
        raise EngineError("signal needs a placement or token_id with a run_id")
    known = _held_open(held, placement, token_id) if key is None else None
    if known is not None:
        return known
    parks = await store.parks(run_id=run_id, key=key, placement=placement)
    ex = held
    if len(parks) == 1 and ex is None and token_id is None:
        # The common case: one park, nothing of the run in memory here.
        found = parks[0]
        if found.status == ParkStatus.PARKED:
            return found
    if not parks and run_id is not None and ex is None:
        # (A park of the run, or the run held here, says it exists.)
        try:
            await store.get_run(run_id)
        except KeyError:
            raise SignalRefused(
                RefusalReason.UNKNOWN,
                f"signal refused: no run {run_id!r}",
                **_where(run_id, placement, token_id, key),
            ) from None
    if token_id is not None:
        parks = [p for p in parks if p.token_id == token_id]
    if ex is not None:
        # What this process knows is fresher than the store (a claim not yet committed).
        parks = [park_record(ex.parks, ex.recent_parks, p.id) or p for p in parks]
    where = _where(run_id, placement, token_id, key)
    open_ = [p for p in parks if p.status == "parked"]
    if len(open_) > 1:
        raise SignalRefused(
            RefusalReason.AMBIGUOUS,
            f"signal refused: {len(open_)} parked tokens match "
            f"({', '.join(p.token_id for p in open_)}); address one by token_id",
            **where,
        )
    if open_:
        return open_[0]
    if parks:
        raise refusal(parks[-1], now)
    if run_id is not None and placement is not None:
        if ex is not None:
            here = [t for t in ex.tokens.values() if t.placement == placement and t.status.live]
        else:
            # Not held here (let go, or held by another engine): the store knows where
            # its live tokens are.
            live = await store.tokens(run_id, LIVE_TOKEN_STATUSES)
            here = [t for t in live if t.placement == placement]
        if here and not any(t.status is TokenStatus.PARKED for t in here):
            raise SignalRefused(
                RefusalReason.NOT_PARKED,
                f"signal refused: the token at {placement!r} is not parked "
                f"(it is {here[0].status.value})",
                **where,
            )
    what = f"key {key!r}" if key is not None else f"placement {placement!r}"
    raise SignalRefused(
        RefusalReason.UNKNOWN,
        f"signal refused: no token ever parked with {what}"
        + (f" in run {run_id!r}" if run_id else ""),
        **where,
    )


def _held_open(
    held: RunView | None, placement: str | None, token_id: str | None
) -> ParkRecord | None:
    """The one open park addressed of the run held here (or rebuilt to be woken), which knows
    its open parks: it needs no read. (None, or several: the store tells why.)"""
    if held is None:
        return None
    mine = [
        p
        for p in held.parks.values()
        if (placement is None or p.placement == placement)
        and (token_id is None or p.token_id == token_id)
    ]
    return mine[0] if len(mine) == 1 and mine[0].status == ParkStatus.PARKED else None


def _where(
    run_id: str | None, placement: str | None, token_id: str | None, key: str | None
) -> dict[str, Any]:
    """What a signal addressed (for its refusal)."""
    return {"run_id": run_id, "placement": placement, "token_id": token_id, "key": key}
