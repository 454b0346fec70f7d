"""A run's snapshot on SQLite: everything a rebuild reads
(:meth:`~flowtide.store.base.Store.load_run`) in seven statements run together in the store's
thread, so at one snapshot of the database, read into a snapshot by the shared decoder
(:func:`~flowtide.store.sqlcore.reads.snapshot_of_rows`). (PostgreSQL reads it in one statement
instead: :mod:`flowtide.store.postgres.snapshot`.)"""

from __future__ import annotations

from flowtide.store.base import ParkStatus, RunSnapshot
from flowtide.store.sqlcore.connector import Connector
from flowtide.store.sqlcore.reads import snapshot_of_rows

__all__ = ["load_snapshot"]


async def load_snapshot(db: Connector, run_id: str) -> RunSnapshot:
    """The snapshot of run ``run_id`` (raises :class:`~flowtide.store.base.UnknownRunError`)."""
    params = {"run_id": run_id}
    parks = {**params, "placement": None, "open_only": True, "parked": str(ParkStatus.PARKED)}
    together = await db.read_together(
        [
            ("load_run_record", params),
            ("get_state", params),
            ("tokens", params),
            ("history_after_checkpoint", params),
            ("parks_by_run", parks),
            ("node_anchors", params),
            ("due_of", params),
        ]
    )
    return snapshot_of_rows(run_id, together, db.dialect)
