"""An in-memory store: for tests and throwaway runs. Nothing survives the process.

It is the reference the database stores are measured against, so it behaves as they do. What a
database keeps as JSON (run state, token and event data, park payloads, scatter results and keys,
run results, options and checkpoints, signal answers and requests) is kept here as JSON text and
decoded on every read: what comes back is what a database gives back (a tuple comes back as a
list), as new objects every time. A commit is checked whole (the run, its expectations, its signal
keys, every value it would keep as JSON) before anything changes, and applied without yielding to
the event loop, so other tasks see all of it or nothing.

:class:`MemoryStore` is the :class:`~flowtide.store.base.Store` over the parts that do this: its
tables (:mod:`~flowtide.store.memory.tables`, of rows: :mod:`~flowtide.store.memory.rows`), its
leases and wake instants (:mod:`~flowtide.store.memory.leases`), its commits
(:mod:`~flowtide.store.memory.commits`), signal requests (:mod:`~flowtide.store.memory.requests`),
reads (:mod:`~flowtide.store.memory.reads`), flow documents and worker heartbeats
(:mod:`~flowtide.store.memory.flows`, :mod:`~flowtide.store.memory.workers`) and pruning
(:mod:`~flowtide.store.memory.pruning`). Every part but the waits is synchronous: nothing the
store does yields to the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    PRUNE_BATCH,
    Commit,
    DueEntry,
    EventRecord,
    Lease,
    NodeAnchor,
    ParkRecord,
    RunRecord,
    RunSnapshot,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    Store,
    StoredFlow,
    StoredFlowVersion,
    TokenRecord,
    TokenStatus,
    WorkerRecord,
)
from flowtide.store.memory.commits import Commits
from flowtide.store.memory.flows import Flows
from flowtide.store.memory.leases import Leases
from flowtide.store.memory.pruning import Pruning
from flowtide.store.memory.reads import Reads
from flowtide.store.memory.requests import Requests
from flowtide.store.memory.tables import Tables
from flowtide.store.memory.workers import Workers

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A store in this process's memory: for tests and throwaway runs (nothing survives it)."""

    def __init__(self) -> None:
        tables = Tables()
        self._leases = Leases(tables)
        self._commits = Commits(tables, self._leases)
        self._requests = Requests(tables, self._leases)
        self._pruning = Pruning(tables, self._leases)
        self._reads = Reads(tables)
        self._flows = Flows(tables)
        self._workers = Workers(tables)

    # -- writes ------------

    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        return self._commits.create_run(run, state, commit, lease=lease)

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return self._commits.commit(commit)

    async def prune_runs(
        self,
        ended_before: datetime,
        *,
        limit: int = PRUNE_BATCH,
        after: str = "",
        dry_run: bool = False,
    ) -> Sequence[str]:
        return self._pruning.prune_runs(ended_before, limit=limit, after=after, dry_run=dry_run)

    # -- signal requests ------------

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        return self._requests.request_signal(request)

    def on_request(self, wake: Callable[[], None]) -> Callable[[], None]:
        return self._leases.on_request(wake)

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        return self._requests.signal_request(request_id)

    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        return self._requests.pending_requests(run_id)

    # -- leases and wake instants ------------

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        return await self._leases.wait_changed(seconds)

    async def next_wake(self) -> datetime | None:
        return self._leases.next_wake()

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        return self._leases.claim_runs(owner, now, expires, limit)

    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        return self._leases.acquire_run(run_id, owner, now, expires, force=force)

    async def renew_leases(
        self,
        owner: str,
        expires: datetime,
        *,
        now: datetime | None = None,
        run_ids: Collection[str] | None = None,
    ) -> Sequence[Lease]:
        return self._leases.renew_leases(owner, expires, now=now, run_ids=run_ids)

    async def release_runs(self, owner: str) -> Sequence[str]:
        return self._leases.release_runs(owner)

    async def lease_of(self, run_id: str) -> Lease | None:
        return self._leases.lease_of(run_id)

    # -- flows and workers ------------

    async def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        return self._flows.put_flow(flow, stored_at=stored_at)

    async def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        return self._flows.get_flow(flow_id, digest)

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        return self._flows.latest_flow(flow_id)

    async def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        return self._flows.flow_versions(flow_id)

    async def record_worker(self, worker: WorkerRecord) -> None:
        self._workers.record_worker(worker)

    async def workers(self) -> Sequence[WorkerRecord]:
        return self._workers.workers()

    async def forget_worker(self, worker_id: str) -> bool:
        return self._workers.forget_worker(worker_id)

    # -- reads ------------

    async def get_run(self, run_id: str) -> RunRecord:
        return self._reads.get_run(run_id)

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return self._reads.list_runs(lifecycle)

    async def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        return self._reads.run_ids(prefix, limit)

    async def get_state(self, run_id: str) -> dict[str, Any]:
        return self._reads.get_state(run_id)

    async def load_run(self, run_id: str) -> RunSnapshot:
        snapshot = await super().load_run(run_id)
        snapshot.lease, snapshot.epoch = self._reads.holder(run_id)
        return snapshot

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        return self._reads.tokens(run_id, statuses)

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        return self._reads.token(run_id, token_id)

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        return self._reads.history(run_id, after)

    async def due_of(self, run_id: str) -> Sequence[DueEntry]:
        return self._reads.due_of(run_id)

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._reads.node_anchor(run_id, placement, item)

    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return self._reads.node_anchors(run_id)

    async def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        return self._reads.parks(run_id=run_id, key=key, placement=placement, open_only=open_only)

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        return self._reads.signal_answer(key)

    async def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
        return self._reads.scatter_items(run_id, progress)

    def due_entries(self) -> list[DueEntry]:
        """Every due entry of every run, earliest first (for tests)."""
        return self._reads.due_entries()
