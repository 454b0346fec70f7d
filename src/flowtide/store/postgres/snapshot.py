"""Runs' snapshots on PostgreSQL in one statement: everything a rebuild reads
(:meth:`~flowtide.store.base.Store.load_run`) as one JSON document a run
(``load_runs_whole``), read into the rows the shared decoder takes
(:func:`~flowtide.store.sqlcore.reads.snapshot_of_rows`).

One statement sees one snapshot of the database by itself: no read-only transaction to open and
close around seven reads (nine statements), one round trip, one value a run for the client to
parse; and the reads of several runs that wait for one another go together (grouped as commits
are: :mod:`flowtide.store.postgres.group`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

from flowtide.store.base import ParkStatus, RunSnapshot, UnknownRunError
from flowtide.store.postgres.group import Groups
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT, Params, text_array
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.reads import snapshot_of_rows

__all__ = ["Snapshots", "decode"]

_AS_JSON: Final = dataclasses.replace(DIALECT, read_instant=datetime.fromisoformat)
"""How the rows of ``load_runs_whole`` hold values: as :data:`DIALECT` does, but instants as
JSON gives them (ISO 8601 text)."""
_PARKED: Final = str(ParkStatus.PARKED)

Rows = Callable[[str, Params], Awaitable[Sequence[Row]]]
"""Runs one statement (its text, its parameters) on its own; its rows."""


class Snapshots:
    """The snapshots of runs read with ``rows`` (one statement on its own): those asked for
    while one is read are read together, next, in one statement."""

    def __init__(self, rows: Rows) -> None:
        self._rows = rows
        self._groups: Groups[str, str | None] = Groups(self._one, self._read, str)

    async def load(self, run_id: str) -> RunSnapshot:
        """The snapshot of run ``run_id`` (see :meth:`~flowtide.store.base.Store.load_run`)."""
        return decode(run_id, await self._groups.send(run_id))

    async def _one(self, run_id: str) -> str | None:
        return (await self._read([run_id]))[0]

    async def _read(self, run_ids: list[str]) -> list[str | None]:
        """The snapshot of each run of ``run_ids`` as its JSON text (None: no such run)."""
        params = {"run_ids": text_array(run_ids), "parked": _PARKED}
        found = await self._rows(Q["load_runs_whole"], params)
        texts: dict[str, str] = {row[0]: row[1] for row in found}
        return [texts.get(run_id) for run_id in run_ids]


def decode(run_id: str, text: str | None) -> RunSnapshot:
    """The snapshot of run ``run_id`` from its JSON text (as ``load_runs_whole`` gives it;
    None: no such run)."""
    if text is None:
        raise UnknownRunError(run_id)
    record, *rest = json.loads(text)
    together: list[Sequence[Row]] = [[record], *(part or [] for part in rest)]
    return snapshot_of_rows(run_id, together, _AS_JSON)
