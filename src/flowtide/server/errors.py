"""The API's errors: ``{"error": {"code", "message"}}`` with a fitting status, never a
traceback; and the limit on request bodies."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowtide.engine import UnknownFlowError
from flowtide.engine.state.limits import InvalidKeyError, ValueTooLargeError
from flowtide.errors import FlowValidationError
from flowtide.store.base import StoreError, UnknownRunError

__all__ = ["MAX_BODY", "ApiError", "BodyLimit", "error_body", "install_error_handlers"]

log = logging.getLogger("flowtide.server")

MAX_BODY = 1024 * 1024
"""The largest request body taken (bytes); a larger one is answered 413."""


class ApiError(Exception):
    """An answer that is not a success: ``status``, a snake_case ``code`` and one line."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}, **extra}


def _answer(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(code, message, **extra), status_code=status)


HTTP_CODES = {
    400: "bad_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "refused",
    410: "gone",
    413: "too_large",
    415: "unsupported_media_type",
    503: "unavailable",
}


def _located(exc: RequestValidationError) -> str:
    """The first problem of a request that does not fit its schema, with where it is."""
    errors = exc.errors()
    if not errors:
        return "the request is not valid"
    first = errors[0]
    if tuple(first.get("loc", ())) == ("body",):
        return "the body must be a JSON object (Content-Type: application/json)"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def install_error_handlers(app: FastAPI) -> None:
    """Every failure answered as an error document: ours, the framework's and Flowtide's."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _answer(exc.status, exc.code, exc.message, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _answer(400, "bad_input", _located(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "error")
        return _answer(exc.status_code, code, str(exc.detail))

    @app.exception_handler(UnknownRunError)
    async def unknown_run(request: Request, exc: UnknownRunError) -> JSONResponse:
        return _answer(404, "unknown_run", f"no run {exc.run_id!r}")

    @app.exception_handler(UnknownFlowError)
    async def unknown_flow(request: Request, exc: UnknownFlowError) -> JSONResponse:
        return _answer(404, "unknown_flow", f"no flow {exc.flow_id!r} is stored")

    @app.exception_handler(FlowValidationError)
    async def invalid_flow(request: Request, exc: FlowValidationError) -> JSONResponse:
        problems = [
            {
                "message": p.message,
                "pointer": p.pointer,
                "placement": p.placement,
                "severity": p.severity,
            }
            for p in exc.problems
        ]
        return _answer(422, "invalid_flow", "the flow document is not valid", problems=problems)

    @app.exception_handler(ValueTooLargeError)
    @app.exception_handler(InvalidKeyError)
    async def bad_value(request: Request, exc: Exception) -> JSONResponse:
        return _answer(400, "bad_input", _line(str(exc)))

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        log.warning("store error on %s %s: %s", request.method, request.url.path, exc)
        return _answer(503, "store_unavailable", "the store could not answer; try again")

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return _answer(500, "internal_error", "internal error (the server's log has the details)")


def _line(text: str) -> str:
    return " ".join(text.split())


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413, whether it says its length or
    not: the body is read here (it is small, or refused) before the route sees it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)  # (disconnected)
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        said = f"the request body is larger than {self.limit} bytes"
        await _answer(413, "too_large", said)(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``messages`` first, then what ``receive`` gives (a disconnect, later)."""
    waiting = list(messages)

    async def replayed() -> Message:
        if waiting:
            return waiting.pop(0)
        return await receive()

    return replayed
