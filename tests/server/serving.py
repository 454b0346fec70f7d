"""An application on a fresh store of the test's kind, with its lifespan, and an HTTP client
that talks to it in process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from flowtide.documents import to_document
from flowtide.server import Tokens, create_app
from flowtide.store.base import Store
from tests.client.approval import FLOW, approval
from tests.engine.engine_helpers import fresh_store

__all__ = ["FLOW", "TOKEN", "WRITE", "serving"]

TOKEN = "s3cret-token-for-tests"
WRITE = {"Authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def serving(
    *,
    tokens: Mapping[str, str] | None = None,
    worker: bool = False,
    store: Store | None = None,
    register: bool = True,
    **options: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """The API on a fresh store (``tokens``: default one named ``ops``), the approval flow
    registered unless ``register`` is false."""
    kept = store if store is not None else fresh_store()
    await kept.open()
    chosen = Tokens(dict(tokens if tokens is not None else {"ops": TOKEN}))
    app = create_app(
        kept, tokens=chosen, worker=worker, poll=0.05, drain=timedelta(seconds=2), **options
    )
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
                if register:
                    registered = await http.post(
                        "/api/flows", json=to_document(approval()), headers=WRITE
                    )
                    assert registered.status_code == 201, registered.text
                yield http, app
    finally:
        await kept.close()


async def until(check: Any, what: str, tries: int = 400) -> Any:
    """``check()`` (awaited) once it is truthy; fails saying ``what`` after ``tries`` looks."""
    import asyncio

    for _ in range(tries):
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what}: never happened")
