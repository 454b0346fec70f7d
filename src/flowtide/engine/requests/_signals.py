"""Signals to parked tokens: why one is refused, what an accepted one answers and records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.errors import (
    RefusalReason,
    SignalRefused,
)
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.handles import SignalReceipt
from flowtide.model.placements import (
    RESERVED_OUTPUTS,
    AnyPlacement,
)
from flowtide.store.base import (
    ParkRecord,
    ParkStatus,
    TokenRecord,
)


def refusal(park: ParkRecord, now: datetime, live: TokenRecord | None = None) -> SignalRefused:
    """Why a signal for ``park`` cannot apply (``live``: the token as it is now, if known)."""
    from flowtide.engine.errors import format_gap, format_instant

    where = f"token {park.token_id} at {park.placement!r}"
    common: dict[str, Any] = {
        "run_id": park.run_id,
        "placement": park.placement,
        "token_id": park.token_id,
        "key": park.key,
    }
    expired = park.status is ParkStatus.TIMED_OUT or (
        park.status is ParkStatus.PARKED and park.deadline is not None and park.deadline <= now
    )
    if expired and park.deadline is not None:
        return SignalRefused(
            RefusalReason.EXPIRED,
            f"signal refused: {where} expired at {format_instant(park.deadline, now)}, "
            f"{format_gap(now - park.deadline)} before this signal",
            at=park.deadline,
            **common,
        )
    at = park.closed_at
    when = f" at {format_instant(at, now)}" if at is not None else ""
    if park.status is ParkStatus.CANCELLED:
        return SignalRefused(
            RefusalReason.CANCELLED,
            f"signal refused: {where} was cancelled{when} ({park.closed_by or 'cancelled'})",
            at=at,
            **common,
        )
    if park.status in (ParkStatus.SIGNALLED, ParkStatus.INTERRUPTED):
        by = "an escalation timer" if park.status is ParkStatus.INTERRUPTED else "a signal"
        return SignalRefused(
            RefusalReason.MOVED_ON,
            f"signal refused: {where} already moved on{when}, by {by}",
            at=at,
            **common,
        )
    state = live.status.value if live is not None else "gone"
    return SignalRefused(
        RefusalReason.NOT_PARKED,
        f"signal refused: {where} is not parked (it is {state})",
        **common,
    )


def invalid_output(
    plan: FlowPlan, p: AnyPlacement, output: str, token_id: str, park: ParkRecord
) -> SignalRefused | None:
    """Why a signal may not take ``output`` at ``p`` (None: it may)."""
    # (A node whose type is unknown here may take any output its placement routes.)
    declared = plan.outputs(p.id) or p.fixed_outputs or tuple(p.route_map())
    if output in RESERVED_OUTPUTS or output not in declared:
        return SignalRefused(
            RefusalReason.INVALID_OUTPUT,
            f"signal refused: output {output!r} is not one node at {p.id!r} declares "
            f"(declared: {', '.join(declared)})",
            run_id=park.run_id,
            placement=p.id,
            token_id=token_id,
            key=park.key,
        )
    if output not in p.route_map():
        return SignalRefused(
            RefusalReason.INVALID_OUTPUT,
            f"signal refused: placement {p.id!r} does not route output {output!r}",
            run_id=park.run_id,
            placement=p.id,
            token_id=token_id,
            key=park.key,
        )
    return None


def signal_answer(
    park: ParkRecord, output: str | None, now: datetime, idempotency_key: str | None
) -> dict[str, Any]:
    """The answer to an accepted signal (what a repeat with its idempotency key gets)."""
    return {
        "run_id": park.run_id,
        "token_id": park.token_id,
        "placement": park.placement,
        "output": output,
        "at": isoformat(now),
        "park": park.id,
        "idempotency_key": idempotency_key,
    }


# -- the answers to signal requests (signals sent to a run another engine holds) ------------


def accepted_reply(answer: dict[str, Any], *, duplicate: bool = False) -> dict[str, Any]:
    """A request's answer: an accepted signal's ``answer`` (``duplicate``: an earlier signal
    with its idempotency key had it)."""
    return {"accepted": answer, "duplicate": duplicate}


def refused_reply(refused: SignalRefused) -> dict[str, Any]:
    """A request's answer: the refusal, whole, to be raised again where the signal was sent."""
    return {"refused": {**refused.details(), "message": str(refused)}}


def receipt_of(reply: dict[str, Any]) -> SignalReceipt:
    """What a request's answer says: its receipt, or the refusal raised."""
    refused = reply.get("refused")
    if refused is not None:
        at = refused.get("at")
        raise SignalRefused(
            RefusalReason(refused["reason"]),
            refused["message"],
            at=datetime.fromisoformat(at) if at is not None else None,
            run_id=refused.get("run_id"),
            placement=refused.get("placement"),
            token_id=refused.get("token_id"),
            key=refused.get("key"),
        )
    return SignalReceipt.from_answer(reply["accepted"], duplicate=bool(reply.get("duplicate")))
