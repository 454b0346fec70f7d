"""What the shared SQL store core (:mod:`flowtide.store.sqlcore`) needs of a database: a
:class:`Connector` runs one named statement of its backend's ``queries.sql`` and gives back its
rows, or a script of them in one write transaction (:mod:`flowtide.store.sqlcore.script`).
SQLite's runs them in the store's thread, PostgreSQL's on a pooled psycopg connection; each
says how its database binds and gives back values (its :class:`Dialect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from flowtide.store.base import UnknownRunError
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlcore.script import Script

T = TypeVar("T")

__all__ = ["Connector", "Row", "joined", "run_rows"]

Row = Sequence[Any]
"""One row of a statement, its columns in the order of the statement's ``SELECT`` list (the
same order in every backend's ``queries.sql``)."""


class Connector(Protocol):
    """One SQL backend, as the core uses it."""

    @property
    def dialect(self) -> Dialect:
        """How the backend binds values and gives them back."""
        ...

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        """The rows of statement ``name``, run on its own (it sees one snapshot)."""
        ...

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        """The rows of each statement of ``reads`` (a name and its parameters), all at one
        snapshot of the database (one read transaction; one round trip where the backend can
        send them together)."""
        ...

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        """The rows of statement ``name``, run in a write transaction of its own, committed
        before this returns. ``tell``: others waiting on the store for a change should look
        again (a backend whose statement tells them itself, as PostgreSQL's ``NOTIFY`` does,
        may ignore it)."""
        ...

    async def transact(self, script: Script[T], *, tell: bool = False) -> T:
        """Drive ``script`` in a write transaction (SQLite's is shared with the other writes
        waiting for its thread, each in a savepoint), committed before this returns its answer;
        what the script raises rolls back what it wrote and is raised. ``tell``: as for
        :meth:`write`."""
        ...


def joined(rows: Sequence[Row]) -> Sequence[Row]:
    """The rows of a read of one run's rows joined to the run (its existence checked apart):
    none for the one row of NULLs a run without any gives."""
    return rows if rows and rows[0][0] is not None else []


async def run_rows(connector: Connector, name: str, params: Params) -> Sequence[Row]:
    """The rows of a read of one run's rows, joined to the run (``params["run_id"]``): raises
    :class:`UnknownRunError` if the run does not exist, and gives no rows for a run that has
    none (the statement's one row of NULLs)."""
    rows = await connector.read(name, params)
    if not rows:
        raise UnknownRunError(params["run_id"])
    return joined(rows)
