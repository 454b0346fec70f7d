"""Callback URLs: a signed, URL-safe token that resumes exactly one parked token, once, until
its park ends (for webhooks and links in e-mails). The token is the run id, the park id and
the output, with an HMAC-SHA256 of them; ``GET`` or ``POST /callbacks/{token}`` (a POST's JSON
object body is the signal's payload) signals that park; once used, or once the park has
ended, the URL answers 410."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowtide.engine import RequestPending, SignalRefused
from flowtide.engine.run.children import open_parks
from flowtide.server.auth import writer
from flowtide.server.errors import ApiError
from flowtide.server.services import Services, jsonable, services
from flowtide.server.signals import pending

__all__ = ["CallbackBody", "callback_token", "read_callback_token", "router"]

router = APIRouter(tags=["callbacks"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def callback_token(key: bytes, run_id: str, park_id: str, output: str | None) -> str:
    """The token of a callback URL that signals park ``park_id`` of ``run_id`` with
    ``output`` (None: the node runs again)."""
    body = _b64(json.dumps([run_id, park_id, output], separators=(",", ":")).encode())
    return f"{body}.{_b64(hmac.new(key, body.encode(), hashlib.sha256).digest())}"


def read_callback_token(key: bytes, token: str) -> tuple[str, str, str | None] | None:
    """The run id, park id and output a token signs, or None if it is not one of ours."""
    body, _, signature = token.partition(".")
    try:
        given = _unb64(signature)
        expected = hmac.new(key, body.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(given, expected):
            return None
        data = json.loads(_unb64(body))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, list) or len(data) != 3:
        return None
    run_id, park_id, output = data
    if not (isinstance(run_id, str) and isinstance(park_id, str)):
        return None
    return run_id, park_id, output if isinstance(output, str) else None


def _key(found: Services) -> bytes:
    if found.callback_key is None:
        raise ApiError(404, "no_callbacks", "this server signs no callback URLs")
    return found.callback_key


class CallbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    placement: str | None = Field(None, min_length=1, description="The parked placement.")
    token_id: str | None = Field(None, min_length=1, description="The parked token.")
    output: str | None = Field(
        None, min_length=1, description="The output the callback moves the token on by."
    )


@router.post("/api/runs/{run}/callbacks", status_code=201)
async def make_callback(
    run: str,
    body: CallbackBody,
    request: Request,
    found: Annotated[Services, Depends(services)],
    _who: Annotated[str, Depends(writer)],
) -> JSONResponse:
    """A callback URL for the token parked at ``placement`` (or ``token_id``) now."""
    run_id = await found.run_id(run)
    parks = [
        p
        for p in await open_parks(found.store, run_id)
        if (body.placement is None or p.placement == body.placement)
        and (body.token_id is None or p.token_id == body.token_id)
    ]
    if len(parks) != 1:
        what = "no parked token" if not parks else "several parked tokens"
        raise ApiError(400, "not_parked", f"{what} in run {run_id!r} match; name one")
    park = parks[0]
    token = callback_token(_key(found), park.run_id, park.id, body.output)
    url = str(request.url_for("callback_post", token=token))
    answer = {"url": url, "token": token, "run_id": park.run_id, "park": park.id}
    return JSONResponse(answer, status_code=201)


async def _resume(found: Services, token: str, payload: dict[str, Any]) -> JSONResponse:
    read = read_callback_token(_key(found), token)
    if read is None:
        raise ApiError(404, "unknown_callback", "this is not a callback URL of this server")
    run_id, park_id, output = read
    park = next((p for p in await found.store.parks(run_id=run_id) if p.id == park_id), None)
    if park is None or park.closed_at is not None:
        raise ApiError(410, "gone", "this callback was used, or its park has ended")
    try:
        receipt = await found.client.signal(
            run_id,
            token_id=park.token_id,
            output=output,
            payload=payload,
            idempotency_key=f"callback:{park_id}",
            sender="callback",
        )
    except RequestPending as exc:
        return pending(exc)
    except SignalRefused:
        raise ApiError(410, "gone", "this callback was used, or its park has ended") from None
    if receipt.duplicate:
        raise ApiError(410, "gone", "this callback was used, or its park has ended")
    return JSONResponse(jsonable({"accepted": True, "run_id": run_id, "park": park_id}))


@router.get("/callbacks/{token}")
async def callback_get(token: str, found: Annotated[Services, Depends(services)]) -> JSONResponse:
    """Resume the parked token the URL was made for (once)."""
    return await _resume(found, token, {})


@router.post("/callbacks/{token}", name="callback_post")
async def callback_post(
    token: str, request: Request, found: Annotated[Services, Depends(services)]
) -> JSONResponse:
    """Resume the parked token the URL was made for (once); a JSON object body is merged into
    the run's state."""
    payload: dict[str, Any] = {}
    raw = await request.body()
    if raw.strip():
        try:
            data = json.loads(raw)
        except ValueError:
            raise ApiError(400, "bad_input", "the body is not JSON") from None
        if not isinstance(data, dict):
            raise ApiError(400, "bad_input", "the body must be a JSON object")
        payload = data
    return await _resume(found, token, payload)
