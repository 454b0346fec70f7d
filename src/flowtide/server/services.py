"""What the routes share: the client on the store, the in-process worker if there is one, the
tokens, and finding a run by its id or the start of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import Request

from flowtide.client import AsyncClient
from flowtide.engine import Engine
from flowtide.server.auth import Tokens
from flowtide.server.errors import ApiError
from flowtide.server.measures import Measures
from flowtide.store.base import Store, UnknownRunError

__all__ = ["CANDIDATES_SHOWN", "Services", "jsonable", "services"]

CANDIDATES_SHOWN = 10


@dataclass
class Services:
    """The server's parts. ``worker``: an engine that runs nodes in this process (``serve
    --nodes``), else None; ``callback_key``: what callback URLs are signed with (None: no
    callback URLs)."""

    client: AsyncClient
    tokens: Tokens
    callback_key: bytes | None = None
    worker: Engine | None = None
    worker_running: bool = False
    metrics: Measures = field(default_factory=Measures)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def store(self) -> Store:
        return self.client.store

    async def run_id(self, given: str) -> str:
        """The id of the run ``given`` names: its whole id or the start of one run's id only
        (404 when none, 400 when several runs' ids start with it)."""
        store = self.store
        try:
            return (await store.get_run(given)).id
        except UnknownRunError:
            pass
        found = list(await store.run_ids(given, limit=CANDIDATES_SHOWN + 1)) if given else []
        if not found:
            raise ApiError(404, "unknown_run", f"no run {given!r}")
        if len(found) > 1:
            listed = ", ".join(found[:CANDIDATES_SHOWN])
            more = ", ..." if len(found) > CANDIDATES_SHOWN else ""
            raise ApiError(
                400,
                "ambiguous_run",
                f"several runs' ids start with {given!r}: {listed}{more}",
            )
        return found[0]


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


def jsonable(value: Any) -> Any:
    """``value`` with its instants as ISO 8601 text (with their offset)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
