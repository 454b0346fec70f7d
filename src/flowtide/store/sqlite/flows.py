"""Flow documents, by flow id and content digest, in the store's thread."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from flowtide.store.base import StoredFlow, StoredFlowVersion, UnknownStoredFlow
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlite.rows import maybe_instant, maybe_micros
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["flow_versions", "get_flow", "latest_flow", "put_flow"]


def put_flow(
    conn: sqlite3.Connection, flow: StoredFlow, document: str, stored_at: datetime | None
) -> bool:
    """Store a flow (``document``: its JSON text); one stored already is kept as it is. True if
    it is new."""
    params = {
        "flow_id": flow.flow_id,
        "digest": flow.digest,
        "version": flow.version,
        "document": document,
        "stored_at": maybe_micros(stored_at),
    }
    return conn.execute(QUERIES["put_flow"], params).rowcount > 0


def get_flow(conn: sqlite3.Connection, flow_id: str, digest: str) -> StoredFlow:
    row = conn.execute(QUERIES["get_flow"], {"flow_id": flow_id, "digest": digest}).fetchone()
    if row is None:
        raise UnknownStoredFlow(flow_id, digest)
    return StoredFlow(flow_id, row["version"], digest, decode_json(row["document"]))


def latest_flow(conn: sqlite3.Connection, flow_id: str) -> StoredFlow:
    row = conn.execute(QUERIES["latest_flow"], {"flow_id": flow_id}).fetchone()
    if row is None:
        raise UnknownStoredFlow(flow_id)
    return StoredFlow(flow_id, row["version"], row["digest"], decode_json(row["document"]))


def flow_versions(conn: sqlite3.Connection, flow_id: str | None) -> list[StoredFlowVersion]:
    rows = conn.execute(QUERIES["flow_versions"], {"flow_id": flow_id}).fetchall()
    return [
        StoredFlowVersion(
            row["flow_id"],
            row["version"],
            row["digest"],
            maybe_instant(row["stored_at"]),
            row["runs"],
            bool(row["latest"]),
        )
        for row in rows
    ]
