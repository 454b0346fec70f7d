"""The server's application: :func:`create_app` builds it on a store, with its tokens and,
optionally, a worker engine that runs nodes in the same process."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from flowtide.authoring.nodes import NodeRegistry
from flowtide.client import AsyncClient
from flowtide.engine import Engine
from flowtide.engine.events import Hook
from flowtide.server import (
    callbacks,
    events,
    flows,
    health,
    metrics,
    runs,
    signals,
    whatif,
)
from flowtide.server.auth import Tokens
from flowtide.server.errors import MAX_BODY, BodyLimit, install_error_handlers
from flowtide.server.logs import RequestLog
from flowtide.server.services import Services
from flowtide.store.base import Store

__all__ = ["CALLBACK_KEY_VARIABLE", "STATIC", "callback_key", "create_app"]

STATIC = Path(__file__).parent / "static"
"""The dashboard's files, shipped in the package."""

CALLBACK_KEY_VARIABLE = "FLOWTIDE_CALLBACK_KEY"

DRAIN = timedelta(seconds=30)


def callback_key(tokens: Tokens, environ: dict[str, str] | None = None) -> bytes | None:
    """What callback URLs are signed with: ``FLOWTIDE_CALLBACK_KEY``, else a key derived from
    the API tokens (None: no token, no callback URLs)."""
    given = (environ if environ is not None else dict(os.environ)).get(CALLBACK_KEY_VARIABLE)
    if given:
        return given.encode()
    if tokens.read_only:
        return None
    secret = "\n".join(f"{n}:{t}" for n, t in sorted(tokens.by_name.items())).encode()
    return hmac.new(secret, b"flowtide callback urls", hashlib.sha256).digest()


def create_app(
    store: str | Store,
    *,
    tokens: Tokens | None = None,
    worker: bool = False,
    registry: NodeRegistry | None = None,
    callback_secret: bytes | None = None,
    log_json: bool = False,
    max_body: int = MAX_BODY,
    drain: timedelta = DRAIN,
    poll: float = 1.0,
    hooks: Sequence[Hook] = (),
) -> FastAPI:
    """The HTTP API on ``store`` (a URL, or a store the caller opens and closes).

    ``tokens``: who may change things (none: read-only); ``worker``: a worker engine in this
    process runs the runs too (drained when the server stops), with the nodes of ``registry``
    (default: the process-wide one);
    ``callback_secret``: signs callback URLs (default: :func:`callback_key`); ``log_json``: a
    JSON line per request on the ``flowtide.server`` log; ``hooks``: more hooks of the worker
    (such as :class:`flowtide.tracing.SpanHook`)."""
    chosen = tokens if tokens is not None else Tokens({})
    client = AsyncClient(store, poll=poll)
    found = Services(
        client=client,
        tokens=chosen,
        callback_key=callback_secret if callback_secret is not None else callback_key(chosen),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await client.__aenter__()
        if worker:
            found.worker = Engine(
                store=client.store,
                registry=registry,
                hooks=[found.metrics.worker.event, *hooks],
                poll=poll,
                instruments=found.metrics.worker,
            )
            found.worker.sweeper.wake()
            found.worker_running = True
        try:
            yield
        finally:
            if found.worker is not None:
                found.worker_running = False
                try:
                    await found.worker.drain(drain)
                finally:
                    await found.worker.close()
            await client.close()

    app = FastAPI(
        title="Flowtide",
        summary="Start, watch, signal and cancel Flowtide runs; register flows.",
        lifespan=lifespan,
    )
    found.extras["poll"] = poll
    app.state.services = found
    app.state.tokens = chosen
    install_error_handlers(app)
    for module in (flows, runs, signals, events, callbacks, health, metrics, whatif):
        app.include_router(module.router)
    _dashboard(app)
    app.add_middleware(RequestLog, enabled=log_json, metrics=found.metrics)
    app.add_middleware(BodyLimit, limit=max_body)
    return app


def _dashboard(app: FastAPI) -> None:
    """``/`` and ``/static``: the dashboard's files, when the package has them."""
    if not STATIC.is_dir():
        return
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    index = STATIC / "index.html"

    @app.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(index, media_type="text/html")
