"""Signal requests in the SQLite store: stored with their due entry, checked and answered by a
commit, read back."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from flowtide.store.base import (
    RequestAnswer,
    RunEndedError,
    SignalRequest,
    StoreError,
    UnknownRunError,
)
from flowtide.store.jsonvalues import decode_json, encode_json
from flowtide.store.sqlite.rows import Params, instant, maybe_instant, micros
from flowtide.store.sqlite.sql import QUERIES

__all__ = [
    "pending_requests",
    "read_request",
    "request_before",
    "request_params",
    "request_signal",
    "unanswerable",
]


def request_params(request: SignalRequest) -> Params:
    """``request`` as parameters (encoded in the caller's task: raises ``NotJSONError``)."""
    return {
        "id": request.id,
        "run_id": request.run_id,
        "requested_at": micros(request.requested_at),
        "request": encode_json(request.request, "request"),
    }


def request_signal(conn: sqlite3.Connection, params: Params) -> SignalRequest:
    """Store a request and its due entry, and bring its run's wake instant up to date; the
    request as stored (recorded no earlier than the latest deadline of its run fired)."""
    run_id = params["run_id"]
    row = conn.execute(QUERIES["run_for_commit"], {"id": run_id}).fetchone()
    if row is None:
        raise UnknownRunError(run_id)
    if row["ended"]:
        raise RunEndedError(run_id, row["lifecycle"])
    if conn.execute(QUERIES["request_exists"], {"id": params["id"]}).fetchone() is not None:
        raise StoreError(f"signal request {params['id']!r} already exists")
    fired = row["deadline_fired"]
    if fired is not None and fired > params["requested_at"]:
        params = {**params, "requested_at": fired}
    conn.execute(QUERIES["insert_request"], params)
    due = {
        "run_id": run_id,
        "token_id": params["id"],
        "purpose": "signal",
        "due_at": params["requested_at"],
    }
    conn.execute(QUERIES["set_due"], due)
    conn.execute(QUERIES["settle_run"], {"id": run_id, "release": False})
    stored = read_request(conn, params["id"])
    assert stored is not None
    return stored


def unanswerable(
    conn: sqlite3.Connection, run_id: str, answers: Sequence[RequestAnswer]
) -> dict[str, str]:
    """The requests ``answers`` answer that may not be: id -> why (``unknown``: no request of
    the run; ``answered``)."""
    refused = {}
    for a in answers:
        found = conn.execute(QUERIES["unanswered_request"], {"id": a.request_id, "run_id": run_id})
        if found.fetchone() is None:
            known = conn.execute(QUERIES["signal_request"], {"id": a.request_id}).fetchone()
            why = "unknown" if known is None or known["run_id"] != run_id else "answered"
            refused[a.request_id] = why
    return refused


def request_before(conn: sqlite3.Connection, run_id: str, deadline: datetime) -> str | None:
    """An unanswered request of the run recorded before ``deadline`` (a commit firing it waits
    for the request to be applied first)."""
    found = conn.execute(QUERIES["request_before"], {"run_id": run_id, "at": micros(deadline)})
    row = found.fetchone()
    return None if row is None else str(row["id"])


def pending_requests(conn: sqlite3.Connection, run_id: str) -> list[SignalRequest]:
    rows = conn.execute(QUERIES["pending_requests"], {"run_id": run_id}).fetchall()
    return [_request(row) for row in rows]


def read_request(conn: sqlite3.Connection, request_id: str) -> SignalRequest | None:
    row = conn.execute(QUERIES["signal_request"], {"id": request_id}).fetchone()
    if row is None:
        return None
    return _request(row)


def _request(row: sqlite3.Row) -> SignalRequest:
    return SignalRequest(
        row["id"],
        row["run_id"],
        instant(row["requested_at"]),
        decode_json(row["request"]),
        decode_json(row["answer"]) if row["answer"] is not None else None,
        maybe_instant(row["answered_at"]),
    )
