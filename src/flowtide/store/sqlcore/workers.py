"""Workers' heartbeats, written once over a
:class:`~flowtide.store.sqlcore.connector.Connector` (what a worker implements and waits on
kept as JSON text: :mod:`flowtide.store.workers`)."""

from __future__ import annotations

from flowtide.store.base import WorkerRecord
from flowtide.store.sqlcore.connector import Connector
from flowtide.store.workers import with_texts

__all__ = ["SQLWorkers"]


class SQLWorkers:
    """The workers' records of :class:`~flowtide.store.base.Store`, as a SQL store keeps them."""

    def __init__(self, connector: Connector) -> None:
        self._db = connector
        self._d = connector.dialect

    async def record_worker(self, worker: WorkerRecord) -> None:
        d = self._d
        params = {
            "worker_id": worker.worker_id,
            "host": worker.host,
            "pid": worker.pid,
            "started_at": d.instant(worker.started_at),
            "last_seen": d.instant(worker.last_seen),
            "lease_ttl": worker.lease_ttl,
            "runs_held": worker.runs_held,
            "nodes": d.json(worker.nodes, "worker/nodes"),
            "waiting": d.json(worker.waiting, "worker/waiting"),
        }
        await self._db.write("record_worker", params)

    async def workers(self) -> list[WorkerRecord]:
        found = []
        for row in await self._db.read("workers", {}):
            worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting = row
            record = WorkerRecord(
                worker_id,
                host,
                pid,
                self._d.read_instant(started_at),
                self._d.read_instant(last_seen),
                lease_ttl,
                runs_held,
            )
            found.append(with_texts(record, nodes, waiting))
        return found

    async def forget_worker(self, worker_id: str) -> bool:
        """True if it was known (a row: it was deleted)."""
        return bool(await self._db.write("forget_worker", {"worker_id": worker_id}))
