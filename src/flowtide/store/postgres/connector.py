"""The PostgreSQL store as the shared SQL core sees it (a
:class:`~flowtide.store.sqlcore.connector.Connector`): a named statement of ``queries.sql`` run
on a pooled connection in autocommit mode, so that each is a transaction of its own; a script
(:mod:`flowtide.store.sqlcore.script`) driven in one transaction in pipeline mode (:func:`drive`:
one round trip for each :class:`~flowtide.store.sqlcore.script.Ask`, the statements it puts
sent with the ``COMMIT``). A statement that must tell other processes of a change
(``settle_run``, ``release_runs``) does so itself, with ``pg_notify`` on the store's channel (a
setting of every connection): the notice is sent if, and when, the change commits.

A statement of ``queries.sql`` is prepared on a connection at its first use there, and planned
once for all (the store's connections make generic plans): its parameters are JSON documents
and ids, which a plan made for their values would not use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import psycopg

from flowtide.store.multirow import batches, many_rows, row_params
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlcore.script import Ask, Script, Statement
from flowtide.store.sqlcore.writes import MANY_ROWS

__all__ = ["PostgresConnector", "drive", "put"]

T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]


class PostgresConnector:
    """Statements run by the store's ``rows`` (a statement's text and parameters: its rows),
    ``together`` (statements: the rows of each, at one snapshot, in one round trip) and
    ``transaction`` (a connection in a transaction, in pipeline mode, committed at the end)."""

    def __init__(
        self,
        rows: Callable[[str, Params], Awaitable[Sequence[Row]]],
        together: Callable[[Sequence[tuple[str, Params]]], Awaitable[list[Sequence[Row]]]],
        transaction: Callable[[], AbstractAsyncContextManager[Connection]],
    ) -> None:
        self._rows = rows
        self._together = together
        self._transaction = transaction

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        return await self._rows(Q[name], params)

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        return await self._together([(Q[name], params) for name, params in reads])

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        # (``tell`` is the statement's own: see the module's docstring.)
        return await self._rows(Q[name], params)

    async def transact(self, script: Script[T], *, tell: bool = False) -> T:
        async with self._transaction() as conn:
            return await drive(conn, script)


async def drive(conn: Connection, script: Script[T]) -> T:
    """Run ``script`` on ``conn`` (in a transaction, in pipeline mode); its answer."""
    try:
        step = next(script)
        while True:
            if isinstance(step, Ask):
                sent = [
                    await conn.execute(Q[name], params, prepare=True)
                    for name, params in step.queries
                ]
                rows: list[Sequence[Row]] = [await cursor.fetchall() for cursor in sent]
            else:
                await put(conn, step.statements)
                rows = []
            step = script.send(rows)
    except StopIteration as done:
        answer: T = done.value
        return answer


async def put(conn: Connection, statements: Sequence[Statement]) -> None:
    """Queue ``statements`` (they run when the pipeline next syncs): an insert of
    :data:`MANY_ROWS` many rows a statement, one row alone a plain statement (which costs
    less)."""
    cursor = conn.cursor()
    for name, rows in statements:
        if len(rows) == 1:
            await cursor.execute(Q[name], rows[0], prepare=True)
        elif name in MANY_ROWS and rows:
            # (A text for each count of rows: prepared once used often, as psycopg decides.)
            for batch in batches(rows, max(1, CACHED_PARAMS // len(rows[0]))):
                await cursor.execute(many_rows(Q[name], len(batch)), row_params(batch))
        elif rows:
            await cursor.executemany(Q[name], rows)


CACHED_PARAMS = 50
"""The most parameters of a statement whose conversion psycopg keeps (it converts a longer one
again at each call, and that costs more than the statements it saves)."""
