"""A run's snapshot (:meth:`Store.load_run`): its reads sent together in one read-only
transaction at one snapshot of the database, and answered in one round trip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from flowtide.store.base import DueEntry, NodeAnchor, ParkStatus, RunSnapshot, UnknownRunError
from flowtide.store.jsonvalues import decode_json
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import event_of_row, park_of_row, run_of_row, token_of_row

__all__ = ["read_snapshot", "send_snapshot"]

Cursor = psycopg.AsyncCursor[Any]
_READS = ("get_run", "get_state", "tokens", "history_after_checkpoint", "parks_by_run")
_MORE = ("node_anchors", "due_of")


async def send_snapshot(conn: psycopg.AsyncConnection[Any], run_id: str) -> list[Cursor]:
    """Send the snapshot's reads (first in a transaction, in pipeline mode); their cursors, to
    be read once the transaction has ended."""
    await conn.execute(Q["snapshot_transaction"])
    params = {
        "run_id": run_id,
        "placement": None,
        "open_only": True,
        "parked": str(ParkStatus.PARKED),
    }
    return [await conn.execute(Q[name], params) for name in (*_READS, *_MORE)]


async def read_snapshot(cursors: list[Cursor], run_id: str) -> RunSnapshot:
    """The snapshot the cursors of :func:`send_snapshot` answered."""
    run_rows, state, tokens, history, parks, anchors, due = [
        await cursor.fetchall() for cursor in cursors
    ]
    if not run_rows:
        raise UnknownRunError(run_id)
    return RunSnapshot(
        run_of_row(run_rows[0]),
        {key: decode_json(value) for key, value in _joined(state)},
        [token_of_row(run_id, row) for row in _joined(tokens)],
        [event_of_row(run_id, row) for row in _joined(history)],
        [park_of_row(row) for row in parks],
        [NodeAnchor(run_id, placement, item, at) for placement, item, at in anchors],
        [DueEntry(when, run_id, token_id, purpose) for when, token_id, purpose in _joined(due)],
    )


def _joined(rows: Sequence[Any]) -> Sequence[Any]:
    """The rows of a read joined to the run: none for the one row of NULLs a run without any
    gives."""
    return rows if rows and rows[0][0] is not None else []
