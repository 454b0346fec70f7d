"""Signal requests in the PostgreSQL store: stored with their due entry in one transaction
(which notifies the other processes, the run's holder among them); read back by the shared
core (:mod:`flowtide.store.sqlcore.reads`)."""

from __future__ import annotations

from typing import Any

import psycopg

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RUNNABLE_LIFECYCLES,
    Commit,
    RunEndedError,
    SignalRequest,
    StoreError,
    UnknownRunError,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.postgres.commits import read_facts
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import text_array

__all__ = ["request_signal"]

_ENDED = text_array(sorted(ENDED_LIFECYCLES))
_RUNNABLE = text_array(sorted(RUNNABLE_LIFECYCLES))
Connection = psycopg.AsyncConnection[Any]


async def request_signal(
    conn: Connection, request: SignalRequest, request_text: str, channel: str, *, own_clock: bool
) -> SignalRequest:
    """Store ``request`` and its due entry, with its run's row locked, recorded at the
    database's clock (``own_clock``; else at the instant given); the run's wake instant is
    brought up to date and the store's channel notified (the holder may be elsewhere). Returns
    the request as stored."""
    run_id = request.run_id
    facts = await read_facts(conn, Commit(run_id))
    if facts is None:
        raise UnknownRunError(run_id)
    if facts.lifecycle in ENDED_LIFECYCLES:
        raise RunEndedError(run_id, str(facts.lifecycle))
    inserted = await conn.execute(
        Q["insert_request"],
        {
            "id": request.id,
            "run_id": run_id,
            "requested_at": None if own_clock else request.requested_at,
            "request": request_text,
        },
    )
    row = await inserted.fetchone()
    if row is None:
        raise StoreError(f"signal request {request.id!r} already exists")
    requested_at = row[0]
    cursor = conn.cursor()
    due = {"run_id": run_id, "token_id": request.id, "purpose": "signal"}
    # (Due at once on the clock of whoever sent it, and on the store's.)
    await cursor.execute(Q["set_due"], {**due, "due_at": min(requested_at, request.requested_at)})
    await cursor.execute(
        Q["settle_run"],
        {
            "run_id": run_id,
            "release": False,
            "ended": _ENDED,
            "runnable": _RUNNABLE,
            "channel": channel,
            "payload": run_id[:200],
            "tell": True,  # (the run's holder, wherever it is, must look at once)
            "by_holder": False,
        },
    )
    return SignalRequest(request.id, run_id, requested_at, decode_json(request_text))
