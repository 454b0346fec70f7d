"""Signal requests in the SQLite store: stored with their due entry, in the store's thread."""

from __future__ import annotations

import sqlite3

from flowtide.store.base import RunEndedError, SignalRequest, StoreError, UnknownRunError
from flowtide.store.jsonvalues import encode_json
from flowtide.store.sqlcore.rows import request_of_row
from flowtide.store.sqlite.rows import DIALECT, Params, micros
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["request_params", "request_signal"]


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
    row = conn.execute(QUERIES["run_for_request"], {"run_id": run_id}).fetchone()
    if row is None:
        raise UnknownRunError(run_id)
    if row["ended"]:
        raise RunEndedError(run_id, row["lifecycle"])
    fired = row["deadline_fired"]
    if fired is not None and fired > params["requested_at"]:
        params = {**params, "requested_at": fired}
    if conn.execute(QUERIES["insert_request"], params).fetchone() is None:
        raise StoreError(f"signal request {params['id']!r} already exists")
    due = {
        "run_id": run_id,
        "token_id": params["id"],
        "purpose": "signal",
        "due_at": params["requested_at"],
    }
    conn.execute(QUERIES["set_due"], due)
    conn.execute(QUERIES["settle_run"], {"run_id": run_id, "release": False})
    stored = conn.execute(QUERIES["signal_request"], {"id": params["id"]}).fetchone()
    return request_of_row(stored, DIALECT)
