"""Flow documents, by flow id and content digest, in the store's thread."""

from __future__ import annotations

import sqlite3

from flowtide.store.base import StoredFlow, UnknownStoredFlow
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["get_flow", "put_flow"]


def put_flow(conn: sqlite3.Connection, flow: StoredFlow, document: str) -> None:
    """Store a flow (``document``: its JSON text); one stored already is kept as it is."""
    params = {
        "flow_id": flow.flow_id,
        "digest": flow.digest,
        "version": flow.version,
        "document": document,
    }
    conn.execute(QUERIES["put_flow"], params)


def get_flow(conn: sqlite3.Connection, flow_id: str, digest: str) -> StoredFlow:
    row = conn.execute(QUERIES["get_flow"], {"flow_id": flow_id, "digest": digest}).fetchone()
    if row is None:
        raise UnknownStoredFlow(flow_id, digest)
    return StoredFlow(flow_id, row["version"], digest, decode_json(row["document"]))
