"""Work done in one write transaction that reads what it needs and decides as it goes (a commit
checked on its run's row, a signal request, a prune), written once for both SQL stores as a
*script*: a generator that yields what to run next and is sent back the rows.

A script yields an :class:`Ask` (statements whose rows it reads next: sent together, one round
trip where the backend pipelines) or a :class:`Put` (statements whose rows it does not read:
queued, sent with the ``COMMIT`` where the backend pipelines; one that fails fails the
transaction); it raises to refuse (nothing of it stays), and returns its answer. The script
itself does no I/O: each backend drives it (:meth:`Connector.transact
<flowtide.store.sqlcore.connector.Connector.transact>`), SQLite in its thread, inside the write
transaction it shares with the other writes waiting there, PostgreSQL in a pipeline.

Build a script in the caller's task (its values encoded there: what the caller changes
afterwards changes nothing), and run its generator body only under the driver.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from flowtide.store.sqlcore.params import Params

__all__ = ["Ask", "Put", "Query", "Script", "Statement"]

T = TypeVar("T")

Row = Sequence[Any]
"""One row of a statement (as :data:`flowtide.store.sqlcore.connector.Row`)."""

Query = tuple[str, Params]
"""A statement by name, with its parameters."""

Statement = tuple[str, list[Params]]
"""A statement by name, run once for each set of parameters (a backend may write the rows of an
insert of :data:`~flowtide.store.sqlcore.writes.MANY_ROWS` many a statement)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Statements whose rows the script reads next: it is sent the rows of each, in order."""

    queries: Sequence[Query]


@dataclass(frozen=True, slots=True)
class Put:
    """Statements whose rows the script does not read, run in order: it is sent no rows."""

    statements: Sequence[Statement]


Script = Generator[Ask | Put, list[Sequence[Row]], T]
"""Work in one write transaction (see the module's docstring): it yields what to run, is sent
the rows asked for, and returns its answer."""
