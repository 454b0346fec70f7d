"""The memory store's worker heartbeats, with their nodes and waiting runs kept as JSON
text."""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.store.base import WorkerRecord
from flowtide.store.memory.rows import replace
from flowtide.store.memory.tables import Tables
from flowtide.store.workers import with_texts, worker_texts

__all__ = ["Workers"]


class Workers:
    """The worker heartbeats kept in ``tables``."""

    def __init__(self, tables: Tables) -> None:
        self._workers = tables.workers

    def record_worker(self, worker: WorkerRecord) -> None:
        nodes, waiting = worker_texts(worker)
        self._workers[worker.worker_id] = (replace(worker, nodes=[], waiting={}), nodes, waiting)

    def workers(self) -> Sequence[WorkerRecord]:
        return [with_texts(*self._workers[w]) for w in sorted(self._workers)]

    def forget_worker(self, worker_id: str) -> bool:
        return self._workers.pop(worker_id, None) is not None
