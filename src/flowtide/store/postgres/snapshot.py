"""A run's snapshot on PostgreSQL in one statement: everything a rebuild reads
(:meth:`~flowtide.store.base.Store.load_run`) as one JSON document (``load_run_whole``), read
into the rows the shared decoder takes (:func:`~flowtide.store.sqlcore.reads.snapshot_of_rows`).

One statement sees one snapshot of the database by itself: no read-only transaction to open and
close around seven reads (nine statements), one round trip, one value for the client to parse."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

from flowtide.store.base import ParkStatus, RunSnapshot, UnknownRunError
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT, Params
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.reads import snapshot_of_rows

__all__ = ["load_run"]

_AS_JSON: Final = dataclasses.replace(DIALECT, read_instant=datetime.fromisoformat)
"""How the rows of ``load_run_whole`` hold values: as :data:`DIALECT` does, but instants as
JSON gives them (ISO 8601 text)."""
_PARKED: Final = str(ParkStatus.PARKED)

Rows = Callable[[str, Params], Awaitable[Sequence[Row]]]
"""Runs one statement (its text, its parameters) on its own; its rows."""


async def load_run(rows: Rows, run_id: str) -> RunSnapshot:
    """The snapshot of run ``run_id``, read with ``rows`` in one statement."""
    found = await rows(Q["load_run_whole"], {"run_id": run_id, "parked": _PARKED})
    if not found:
        raise UnknownRunError(run_id)
    record, *rest = json.loads(found[0][0])
    together: list[Sequence[Row]] = [[record], *(part or [] for part in rest)]
    return snapshot_of_rows(run_id, together, _AS_JSON)
