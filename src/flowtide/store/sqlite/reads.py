"""Reads, in the store's thread: each is one statement (its own snapshot), but for the check
that a run exists when a statement found nothing of it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    DueEntry,
    EventRecord,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlite.rows import (
    anchor_item,
    instant,
    read_anchor,
    read_answer,
    read_due,
    read_event,
    read_park,
    read_run,
    read_scatter_item,
    read_token,
)
from flowtide.store.sqlite.sql import QUERIES

__all__ = [
    "due_of",
    "get_run",
    "get_state",
    "history",
    "list_runs",
    "node_anchor",
    "node_anchors",
    "parks",
    "scatter_items",
    "signal_answer",
    "token",
    "tokens",
]


def _known(conn: sqlite3.Connection, run_id: str) -> None:
    """Raise :class:`UnknownRunError` unless the run exists."""
    if conn.execute(QUERIES["run_exists"], {"id": run_id}).fetchone() is None:
        raise UnknownRunError(run_id)


def get_run(conn: sqlite3.Connection, run_id: str) -> RunRecord:
    row = conn.execute(QUERIES["get_run"], {"id": run_id}).fetchone()
    if row is None:
        raise UnknownRunError(run_id)
    return read_run(row)


def list_runs(conn: sqlite3.Connection, lifecycle: str | None) -> list[RunRecord]:
    if lifecycle is None:
        rows = conn.execute(QUERIES["list_runs"])
    else:
        rows = conn.execute(QUERIES["list_runs_by_lifecycle"], {"lifecycle": lifecycle})
    return [read_run(row) for row in rows]


def get_state(conn: sqlite3.Connection, run_id: str) -> dict[str, Any]:
    rows = conn.execute(QUERIES["get_state"], {"run_id": run_id}).fetchall()
    if not rows:
        _known(conn, run_id)
    return {row["key"]: decode_json(row["value"]) for row in rows}


def tokens(
    conn: sqlite3.Connection, run_id: str, statuses: Sequence[TokenStatus] | None
) -> list[TokenRecord]:
    if statuses is None:
        rows = conn.execute(QUERIES["tokens"], {"run_id": run_id}).fetchall()
    else:
        wanted = json.dumps([str(status) for status in statuses])
        params = {"run_id": run_id, "statuses": wanted}
        rows = conn.execute(QUERIES["tokens_by_status"], params).fetchall()
    if not rows:
        _known(conn, run_id)
    return [read_token(row) for row in rows]


def token(conn: sqlite3.Connection, run_id: str, token_id: str) -> TokenRecord | None:
    row = conn.execute(QUERIES["token"], {"run_id": run_id, "id": token_id}).fetchone()
    if row is None:
        _known(conn, run_id)
        return None
    return read_token(row)


def history(conn: sqlite3.Connection, run_id: str, after: int) -> list[EventRecord]:
    rows = conn.execute(QUERIES["history"], {"run_id": run_id, "after": after}).fetchall()
    if not rows:
        _known(conn, run_id)
    return [read_event(row) for row in rows]


def due_of(conn: sqlite3.Connection, run_id: str) -> list[DueEntry]:
    rows = conn.execute(QUERIES["due_of"], {"run_id": run_id}).fetchall()
    if not rows:
        _known(conn, run_id)
    return [read_due(run_id, row) for row in rows]


def node_anchor(
    conn: sqlite3.Connection, run_id: str, placement: str, item: str | None
) -> datetime | None:
    params = {"run_id": run_id, "placement": placement, "item": anchor_item(item)}
    row = conn.execute(QUERIES["node_anchor"], params).fetchone()
    return instant(row["at"]) if row is not None else None


def node_anchors(conn: sqlite3.Connection, run_id: str) -> list[NodeAnchor]:
    return [read_anchor(row) for row in conn.execute(QUERIES["node_anchors"], {"run_id": run_id})]


def parks(
    conn: sqlite3.Connection,
    run_id: str | None,
    key: str | None,
    placement: str | None,
    open_only: bool,
) -> list[ParkRecord]:
    """The parks of a key (in one run, if ``run_id``), else of a run (one of them is given)."""
    params = {
        "run_id": run_id,
        "key": key,
        "placement": placement,
        "open_only": open_only,
        "parked": str(ParkStatus.PARKED),
    }
    query = QUERIES["parks_by_key"] if key is not None else QUERIES["parks_by_run"]
    return [read_park(row) for row in conn.execute(query, params)]


def signal_answer(conn: sqlite3.Connection, key: str) -> SignalAnswer | None:
    row = conn.execute(QUERIES["signal_answer"], {"key": key}).fetchone()
    return read_answer(row) if row is not None else None


def scatter_items(conn: sqlite3.Connection, run_id: str, progress: str) -> list[ScatterItemRecord]:
    params = {"run_id": run_id, "progress": progress}
    return [read_scatter_item(row) for row in conn.execute(QUERIES["scatter_items"], params)]
