"""The SQLite store as the shared SQL core sees it (a
:class:`~flowtide.store.sqlcore.connector.Connector`):
a named statement of ``queries.sql`` run in the store's thread, a read on its own, a write (or
a script of them: :func:`drive`) in the write transaction the thread has open (shared with the
other writes waiting there: :mod:`flowtide.store.sqlite.group`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlcore.script import Ask, Script
from flowtide.store.sqlite.rows import DIALECT
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["SQLiteConnector", "drive"]

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]


class SQLiteConnector:
    """Statements run by the store's ``call`` (a read, in its thread) and ``write`` (in its
    write transaction); ``changed`` counts a change other waiters on the store should see."""

    def __init__(
        self,
        call: Callable[[Work], Awaitable[Any]],
        write: Callable[[Work], Awaitable[Any]],
        changed: Callable[[], None],
    ) -> None:
        self._call = call
        self._write = write
        self._changed = changed

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        statement = QUERIES[name]
        rows: Sequence[Row] = await self._call(
            lambda conn: conn.execute(statement, params).fetchall()
        )
        return rows

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        statements = [(QUERIES[name], params) for name, params in reads]
        found: list[Sequence[Row]] = await self._call(lambda conn: _together(conn, statements))
        return found

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        statement = QUERIES[name]
        rows: Sequence[Row] = await self._write(
            lambda conn: conn.execute(statement, params).fetchall()
        )
        if tell:
            self._changed()
        return rows

    async def transact(self, script: Script[T], *, tell: bool = False) -> T:
        answer: T = await self._write(lambda conn: drive(conn, script))
        if tell:
            self._changed()
        return answer


def drive(conn: sqlite3.Connection, script: Script[T]) -> T:
    """Run ``script`` on ``conn`` (in the store's thread, in its write transaction); its
    answer."""
    try:
        step = next(script)
        while True:
            if isinstance(step, Ask):
                rows: list[Sequence[Row]] = [
                    conn.execute(QUERIES[name], p).fetchall() for name, p in step.queries
                ]
            else:
                for name, many in step.statements:
                    _run(conn, name, many)
                rows = []
            step = script.send(rows)
    except StopIteration as done:
        answer: T = done.value
        return answer


def _run(conn: sqlite3.Connection, name: str, rows: list[Params]) -> None:
    """Statement ``name`` for each of ``rows``: one prepared statement bound again for each row
    (measured: on SQLite this costs less than one statement of many rows, which PostgreSQL
    uses)."""
    if len(rows) == 1:
        conn.execute(QUERIES[name], rows[0])
    elif rows:
        conn.executemany(QUERIES[name], rows)


def _together(conn: sqlite3.Connection, statements: list[tuple[str, Params]]) -> list[Any]:
    """The rows of each statement, in one read transaction (one snapshot of the database,
    whatever other processes write meanwhile)."""
    conn.execute("BEGIN")
    try:
        return [conn.execute(statement, params).fetchall() for statement, params in statements]
    finally:
        conn.execute("COMMIT")  # (a read transaction: nothing to keep or undo)
