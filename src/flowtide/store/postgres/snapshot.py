"""Runs' snapshots on PostgreSQL in one statement: everything a rebuild reads
(:meth:`~flowtide.store.base.Store.load_run`) as one JSON document a run
(``load_runs_whole``), read into the rows the shared decoder takes
(:func:`~flowtide.store.sqlcore.reads.snapshot_of_rows`).

One statement sees one snapshot of the database by itself: no read-only transaction to open and
close around seven reads (nine statements), one round trip, one value a run for the client to
parse; and the reads of several runs that wait for one another go together (the store groups
them as it groups commits: :mod:`flowtide.store.postgres.group`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

from flowtide.store.base import ParkStatus, RunSnapshot, UnknownRunError
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT, Params, text_array
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.reads import snapshot_of_rows

__all__ = ["decode", "read_whole"]

_AS_JSON: Final = dataclasses.replace(DIALECT, read_instant=datetime.fromisoformat)
"""How the rows of ``load_runs_whole`` hold values: as :data:`DIALECT` does, but instants as
JSON gives them (ISO 8601 text)."""
_PARKED: Final = str(ParkStatus.PARKED)

Rows = Callable[[str, Params], Awaitable[Sequence[Row]]]
"""Runs one statement (its text, its parameters) on its own; its rows."""


async def read_whole(rows: Rows, run_ids: list[str]) -> list[str | None]:
    """The snapshot of each run of ``run_ids`` as its JSON text (None: no such run), read with
    ``rows`` in one statement; decoded by :func:`decode`."""
    found = await rows(Q["load_runs_whole"], {"run_ids": text_array(run_ids), "parked": _PARKED})
    texts: dict[str, str] = {row[0]: row[1] for row in found}
    return [texts.get(run_id) for run_id in run_ids]


def decode(run_id: str, text: str | None) -> RunSnapshot:
    """The snapshot of run ``run_id`` from its JSON text (see :func:`read_whole`)."""
    if text is None:
        raise UnknownRunError(run_id)
    record, *rest = json.loads(text)
    together: list[Sequence[Row]] = [[record], *(part or [] for part in rest)]
    return snapshot_of_rows(run_id, together, _AS_JSON)
