"""The PostgreSQL store as the shared SQL core sees it (a
:class:`~flowtide.store.sqlcore.connector.Connector`):
a named statement of ``queries.sql`` run on a pooled connection in autocommit mode, so that
each is a transaction of its own. A statement that must tell other processes of a change
(``release_runs``) does so itself, with ``pg_notify`` on the store's channel (bound to every
statement as ``channel``): the notice is sent if, and when, the change commits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params

__all__ = ["PostgresConnector"]


class PostgresConnector:
    """Statements run by the store's ``rows`` (a statement's text and parameters: its rows),
    and ``together`` (statements: the rows of each, at one snapshot, in one round trip)."""

    def __init__(
        self,
        rows: Callable[[str, Params], Awaitable[Sequence[Row]]],
        together: Callable[[Sequence[tuple[str, Params]]], Awaitable[list[Sequence[Row]]]],
        channel: str,
    ) -> None:
        self._rows = rows
        self._together = together
        self._channel = channel

    @property
    def dialect(self) -> Dialect:
        return DIALECT

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        return await self._rows(Q[name], params)

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        return await self._together([(Q[name], params) for name, params in reads])

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        # (``tell`` is the statement's own: see the module's docstring.)
        return await self._rows(Q[name], {**params, "channel": self._channel})
