"""The SQLite store's statements (``queries.sql``), the transaction every write runs in, and
SQLite's errors as store errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from flowtide.store.base import StoreError, StoreUnusableError
from flowtide.store.sqlfiles import load_queries

__all__ = ["OWN_QUERIES", "QUERIES", "damaged", "immediate", "store_error"]

QUERIES = load_queries("flowtide.store.sqlite", "queries.sql")
"""Statement name -> its text (each is prepared once per connection, then reused)."""

OWN_QUERIES: frozenset[str] = frozenset({"load_run_record", "history_after_checkpoint"})
"""The statements only SQLite has: a run's record and its history after its checkpoint, read
with the rest of a run's snapshot (PostgreSQL reads the snapshot in one statement of its own)."""


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: ``BEGIN IMMEDIATE`` takes the database's write lock before the
    first read (waiting up to the busy timeout for another connection's), so what the
    transaction reads stays true until it commits; it is rolled back if the block raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with suppress(sqlite3.Error):  # (the error that got us here is the one to report)
                conn.execute("ROLLBACK")
        raise


def store_error(error: sqlite3.Error, path: str) -> StoreError:
    """``error``, raised by SQLite on the database at ``path``, as a :class:`StoreError` (a
    :class:`StoreUnusableError` when no retry can help: a damaged or read-only file)."""
    name = getattr(error, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return StoreUnusableError(damaged(path, error))
    if name.startswith("SQLITE_READONLY"):
        return StoreUnusableError(
            f"the store at {path} is read-only: {error} (changing runs needs to write it)"
        )
    if name.startswith("SQLITE_BUSY") or "database is locked" in str(error):
        return StoreError(
            f"the SQLite store {path} is locked: another connection kept it longer than the "
            f"busy timeout ({error})"
        )
    return StoreError(f"the SQLite store {path} failed: {type(error).__name__}: {error}")


def damaged(path: str, error: sqlite3.Error) -> str:
    """What is said of a database file SQLite finds damaged."""
    return f"the store at {path} is damaged: {error} (restore it from a backup)"
