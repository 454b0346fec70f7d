"""The SQLite store as the shared SQL core sees it (a
:class:`~flowtide.store.sqlcore.connector.Connector`):
a named statement of ``queries.sql`` run in the store's thread, a read on its own, a write in
the write transaction the thread has open (shared with the other writes waiting there:
:mod:`flowtide.store.sqlite.group`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlite.rows import DIALECT
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["SQLiteConnector"]

Work = Callable[[sqlite3.Connection], list[Any]]


class SQLiteConnector:
    """Statements run by the store's ``call`` (a read, in its thread) and ``write`` (in its
    write transaction); ``changed`` counts a change other waiters on the store should see."""

    def __init__(
        self,
        call: Callable[[Work], Awaitable[list[Any]]],
        write: Callable[[Work], Awaitable[list[Any]]],
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
        return await self._call(lambda conn: conn.execute(statement, params).fetchall())

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        statement = QUERIES[name]
        rows = await self._write(lambda conn: conn.execute(statement, params).fetchall())
        if tell:
            self._changed()
        return rows
