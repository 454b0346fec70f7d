"""Signals and cancels: ``POST /api/runs/{run}/signals``, ``POST /api/signals`` (by
correlation key) and ``POST /api/runs/{run}/cancel``, with the command line's three answers:
accepted (200), refused with a reason (409), recorded but not yet answered by a worker (202)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowtide.client.views import receipt_json
from flowtide.engine import RefusalReason, RequestPending, SignalRefused
from flowtide.engine.run.children import open_parks
from flowtide.server.auth import writer
from flowtide.server.errors import ApiError
from flowtide.server.services import Services, jsonable, services

__all__ = ["router", "signal_answer"]

router = APIRouter(tags=["signals"])

MOST_WAITED = 60.0
"""The longest a request waits for a worker's answer (seconds)."""

Wait = Field(
    10.0,
    ge=0,
    le=MOST_WAITED,
    description="Seconds to wait for the answer of the worker that holds the run (0: answer "
    "once recorded).",
)


class SignalFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    payload: dict[str, Any] = Field(
        default_factory=dict, description="Merged into the run's state."
    )
    output: str | None = Field(
        None, min_length=1, description="Move the token on by this output (none: run again)."
    )
    idempotency_key: str | None = Field(None, min_length=1)
    wait: float = Wait


class RunSignalBody(SignalFields):
    placement: str | None = Field(None, min_length=1, description="The parked placement.")
    token_id: str | None = Field(None, min_length=1, description="The parked token.")


class KeySignalBody(SignalFields):
    key: str = Field(min_length=1, description="The park's correlation key.")


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str | None = Field(None, description="Why, kept with the run's result.")
    wait: float = Wait


def pending(exc: RequestPending) -> JSONResponse:
    """202: the request is recorded; a worker applies it when it takes the run."""
    body = {"pending": True, "run_id": exc.run_id, "request_id": exc.request_id, "kind": exc.kind}
    return JSONResponse(body, status_code=202)


async def signal_answer(
    found: Services, run_id: str | None, fields: SignalFields, who: str, **address: str | None
) -> JSONResponse:
    """Send the signal and answer as the command line does."""
    try:
        receipt = await found.client.signal(
            run_id,
            payload=fields.payload,
            output=fields.output,
            idempotency_key=fields.idempotency_key,
            wait=fields.wait,
            sender=who,
            **address,
        )
    except RequestPending as exc:
        return pending(exc)
    except SignalRefused as exc:
        if exc.reason is RefusalReason.UNKNOWN:
            raise ApiError(400, "not_parked", await _misaddressed(found, exc, run_id)) from None
        body = {"accepted": False, "reason": str(exc.reason), "message": str(exc)}
        return JSONResponse(body, status_code=409)
    return JSONResponse(jsonable({"accepted": True, **receipt_json(receipt)}))


async def _misaddressed(found: Services, refused: SignalRefused, run_id: str | None) -> str:
    """A signal no park can take, said with what is parked."""
    if run_id is None:
        return f"{refused}; no parked token has this key"
    parks = await open_parks(found.store, run_id)
    where = sorted({p.placement for p in parks})
    if not where:
        return f"{refused}; nothing is parked in run {run_id!r}"
    return f"{refused}; parked in run {run_id!r}: {', '.join(where)}"


@router.post("/api/runs/{run}/signals")
async def signal_run(
    run: str,
    body: RunSignalBody,
    found: Annotated[Services, Depends(services)],
    who: Annotated[str, Depends(writer)],
) -> JSONResponse:
    """Signal a parked token of the run, by its placement or token id."""
    if body.placement is None and body.token_id is None:
        raise ApiError(400, "bad_input", "say which park to signal: 'placement' or 'token_id'")
    run_id = await found.run_id(run)
    return await signal_answer(
        found, run_id, body, who, placement=body.placement, token_id=body.token_id
    )


@router.post("/api/signals")
async def signal_key(
    body: KeySignalBody,
    found: Annotated[Services, Depends(services)],
    who: Annotated[str, Depends(writer)],
) -> JSONResponse:
    """Signal the parked token whose correlation key is ``key``."""
    return await signal_answer(found, None, body, who, key=body.key)


@router.post("/api/runs/{run}/cancel")
async def cancel_run(
    run: str,
    found: Annotated[Services, Depends(services)],
    who: Annotated[str, Depends(writer)],
    body: CancelBody | None = None,
) -> JSONResponse:
    """Cancel the run: 200 with whether it was cancelled (false: it had ended already)."""
    asked = body if body is not None else CancelBody()
    run_id = await found.run_id(run)
    try:
        cancelled = await found.client.cancel(run_id, asked.reason, wait=asked.wait, sender=who)
    except RequestPending as exc:
        return pending(exc)
    record = await found.store.get_run(run_id)
    return JSONResponse({"run_id": run_id, "cancelled": cancelled, "lifecycle": record.lifecycle})
