"""A run's snapshot (:meth:`Store.load_run`), in the store's thread: its reads in one read
transaction, so that they see the database as of one instant whatever other processes write."""

from __future__ import annotations

import sqlite3

from flowtide.store.base import RunSnapshot
from flowtide.store.sqlite import reads


def load_run(conn: sqlite3.Connection, run_id: str) -> RunSnapshot:
    """Everything a rebuild of the run reads (raises :class:`UnknownRunError`)."""
    conn.execute("BEGIN")
    try:
        run = reads.get_run(conn, run_id)
        seen = run.checkpoint.seq if run.checkpoint is not None else 0
        return RunSnapshot(
            run,
            reads.get_state(conn, run_id),
            reads.tokens(conn, run_id, None),
            reads.history(conn, run_id, seen),
            reads.parks(conn, run_id, None, None, True),
            reads.node_anchors(conn, run_id),
            reads.due_of(conn, run_id),
        )
    finally:
        conn.execute("COMMIT")  # (a read transaction: nothing to keep or undo)
