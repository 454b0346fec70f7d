"""Pruning ended runs, in the SQLite store's thread (inside its write transaction, which holds
the database's write lock: no other prune or commit comes between)."""

from __future__ import annotations

import json
import sqlite3

from flowtide.store.sqlfiles import PRUNED_TABLES
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["prunable_runs", "prune_runs"]


def prunable_runs(conn: sqlite3.Connection, ended_before: int, limit: int, after: str) -> list[str]:
    """Up to ``limit`` ids of runs that may be pruned, after ``after`` (``ended_before``: in
    microseconds)."""
    params = {"ended_before": ended_before, "limit": max(limit, 0), "after": after}
    return [row["id"] for row in conn.execute(QUERIES["prunable_runs"], params)]


def prune_runs(conn: sqlite3.Connection, ended_before: int, limit: int, after: str) -> list[str]:
    """Delete up to ``limit`` runs that may be pruned, with everything of theirs (inside the
    caller's write transaction); returns their ids."""
    found = prunable_runs(conn, ended_before, limit, after)
    if found:
        ids = {"ids": json.dumps(found)}
        for table in PRUNED_TABLES:
            conn.execute(QUERIES[f"prune_{table}"], ids)
    return found
