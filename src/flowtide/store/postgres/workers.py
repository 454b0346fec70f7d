"""Workers' heartbeats in the PostgreSQL store: their statements (``workers.sql``), parameters
and rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from flowtide.store.base import WorkerRecord
from flowtide.store.postgres.rows import Params, json_text
from flowtide.store.sqlfiles import load_queries
from flowtide.store.workers import with_texts

__all__ = ["WORKER_QUERIES", "worker_of_row", "worker_params"]

WORKER_QUERIES: Final[dict[str, str]] = load_queries("flowtide.store.postgres", "workers.sql")


def worker_params(worker: WorkerRecord) -> Params:
    """``worker`` as parameters (raises ``NotJSONError``)."""
    return {
        "worker_id": worker.worker_id,
        "host": worker.host,
        "pid": worker.pid,
        "started_at": worker.started_at,
        "last_seen": worker.last_seen,
        "lease_ttl": worker.lease_ttl,
        "runs_held": worker.runs_held,
        "nodes": json_text(worker.nodes, "worker/nodes"),
        "waiting": json_text(worker.waiting, "worker/waiting"),
    }


def worker_of_row(row: Sequence[Any]) -> WorkerRecord:
    worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting = row
    record = WorkerRecord(worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held)
    return with_texts(record, nodes, waiting)
