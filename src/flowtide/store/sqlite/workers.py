"""Workers' heartbeats in the SQLite store, in the store's thread (statements in
``workers.sql``)."""

from __future__ import annotations

import sqlite3

from flowtide.store.base import WorkerRecord
from flowtide.store.sqlfiles import load_queries
from flowtide.store.sqlite.rows import Params, instant, micros
from flowtide.store.workers import with_texts, worker_texts

__all__ = ["forget_worker", "record_worker", "worker_params", "workers"]

QUERIES = load_queries("flowtide.store.sqlite", "workers.sql")


def worker_params(worker: WorkerRecord) -> Params:
    """``worker`` as parameters (encoded in the caller's task: raises ``NotJSONError``)."""
    nodes, waiting = worker_texts(worker)
    return {
        "worker_id": worker.worker_id,
        "host": worker.host,
        "pid": worker.pid,
        "started_at": micros(worker.started_at),
        "last_seen": micros(worker.last_seen),
        "lease_ttl": worker.lease_ttl,
        "runs_held": worker.runs_held,
        "nodes": nodes,
        "waiting": waiting,
    }


def record_worker(conn: sqlite3.Connection, params: Params) -> None:
    conn.execute(QUERIES["record_worker"], params)


def workers(conn: sqlite3.Connection) -> list[WorkerRecord]:
    return [
        with_texts(
            WorkerRecord(
                row["worker_id"],
                row["host"],
                row["pid"],
                instant(row["started_at"]),
                instant(row["last_seen"]),
                row["lease_ttl"],
                row["runs_held"],
            ),
            row["nodes"],
            row["waiting"],
        )
        for row in conn.execute(QUERIES["workers"])
    ]


def forget_worker(conn: sqlite3.Connection, worker_id: str) -> bool:
    return conn.execute(QUERIES["forget_worker"], {"worker_id": worker_id}).rowcount > 0
