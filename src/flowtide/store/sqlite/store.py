"""The SQLite store: Flowtide's embedded default, one database file that many processes may
share.

Each :class:`SQLiteStore` has one connection, used only from one thread of its own: every call
is sent to that thread and awaited, so the event loop never waits for the disk and a store's
calls are applied one at a time, in the order they were made. Every transaction that may write
starts with ``BEGIN IMMEDIATE`` (it holds the database's write lock from its first read to its
commit), so claims, lease fencing and compare-and-set hold across connections and processes.
The database runs in WAL mode: readers do not wait for the writer.

Writes that wait for the thread together share one transaction and its fsync (group commit,
:mod:`flowtide.store.sqlite.group`): each is applied, or refused, on its own, in call order, and
answered only once the transaction holding it has committed, so durability is unchanged.

Other processes' changes are noticed by polling ``PRAGMA data_version``, which changes when
another connection commits (:meth:`SQLiteStore.wait_changed`).

A connection keeps the file it opened even when that file is deleted or replaced (a restore, a
``rm``): its writes would go where nobody reads them. So the file's device and inode are kept
when the database is opened and compared again before each group of writes, each look for other
processes' changes and each ``next_wake``; once they differ the store refuses with
:class:`~flowtide.store.base.StoreUnusableError`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Self, TypeVar

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
    StoreError,
    StoreUnusableError,
    TokenRecord,
    TokenStatus,
    WorkerRecord,
)
from flowtide.store.sqlcore import commits, pruning, requests
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.flows import SQLFlows
from flowtide.store.sqlcore.leases import SQLLeases
from flowtide.store.sqlcore.params import encode_commit
from flowtide.store.sqlcore.reads import SQLReads
from flowtide.store.sqlcore.workers import SQLWorkers
from flowtide.store.sqlite.connector import SQLiteConnector
from flowtide.store.sqlite.group import Write, WriteQueue, apply_group
from flowtide.store.sqlite.rows import DIALECT
from flowtide.store.sqlite.schema import SYNCHRONOUS, open_database
from flowtide.store.sqlite.snapshot import load_snapshot
from flowtide.store.sqlite.sql import store_error
from flowtide.store.sqlite.thread import StoreThread
from flowtide.threads import Reply

__all__ = ["SQLiteStore"]

T = TypeVar("T")

POLL_SECONDS = 0.02
"""How often :meth:`SQLiteStore.wait_changed` looks for another connection's commit."""


class SQLiteStore(Store):
    """A store in the SQLite database file at ``path`` (created, with its schema, on first
    open). ``synchronous``: ``"FULL"`` (each commit is on disk before it returns) or
    ``"NORMAL"`` (faster; a power loss may undo the last commits, never half of one)."""

    shared = True

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "FULL") -> None:
        setting = synchronous.upper()
        if setting not in SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r}"
            )
        self.path = os.fspath(path)
        self.synchronous = setting
        self._thread = StoreThread("flowtide-sqlite")
        self._conn: sqlite3.Connection | None = None
        """Opened, and only ever used, in ``_thread``."""
        self._writes = WriteQueue()
        """Writes waiting for ``_thread``, taken there a group at a time."""
        self._closed = False
        self._data_version = 0
        """``PRAGMA data_version`` as :meth:`wait_changed` last saw it."""
        self._written = 0
        """How many commits this store object has made (seen by :meth:`wait_changed`)."""
        self._file: tuple[int, int] | None = None
        """The device and inode of the file the connection opened."""
        connector = SQLiteConnector(self._call, self._write, self._changed)
        self._db = connector
        self._reads = SQLReads(connector)
        self._leases = SQLLeases(connector)
        self._flows = SQLFlows(connector)
        self._workers = SQLWorkers(connector)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # -- the store's thread ------------

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)``, run in the store's thread (opening the database first if it
        is not open yet)."""
        if self._closed:
            raise StoreError(f"the SQLite store {self.path} is closed")
        with self.busy():
            return await self._thread.call(functools.partial(self._run, work))

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return work(self._conn if self._conn is not None else self._connect())
        except sqlite3.Error as error:
            raise store_error(error, self.path) from error

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)``, applied in the store's thread in a write transaction (shared
        with the other writes waiting there); raises what ``work`` raised, and then it changed
        nothing."""
        if self._closed:
            raise StoreError(f"the SQLite store {self.path} is closed")
        reply: Reply[T] = Reply(asyncio.get_running_loop())
        write = Write(work, reply)
        # Queued before the thread is asked to take it: the call sent to the thread after it (a
        # read, say) finds it applied. Each write sends one take; one finding the queue empty
        # (an earlier take's group held its write) does nothing.
        self._writes.put(write)
        with self.busy():
            self._thread.post(self._apply_waiting)
            return await reply.awaited

    def _changed(self) -> None:
        """Count a change this store made that :meth:`wait_changed` tells its waiters of."""
        self._written += 1

    def _apply_waiting(self) -> None:
        group = self._writes.take()
        if not group:
            return
        try:
            conn = self._conn if self._conn is not None else self._connect()
            self._check_file()
        except BaseException as error:
            failure = store_error(error, self.path) if isinstance(error, sqlite3.Error) else error
            for write in group:
                write.future.set_exception(failure)
            return
        apply_group(conn, group, self.path)

    def _connect(self) -> sqlite3.Connection:
        conn = open_database(self.path, self.synchronous)
        self._data_version = _data_version(conn)
        self._file = _identity(self.path)
        self._conn = conn
        return conn

    def _check_file(self) -> None:
        """Raise :class:`StoreUnusableError` if the database file was deleted or replaced since
        it was opened (called in the store's thread)."""
        if self._file is None:
            return
        now = _identity(self.path)
        if now == self._file:
            return
        what = "deleted" if now is None else "replaced by another file"
        raise StoreUnusableError(
            f"the store at {self.path} was {what} while it was open: what is written now "
            "would be lost; stop, and start again on the file there is"
        )

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as error:
                raise store_error(error, self.path) from error

    async def open(self) -> None:
        await self._call(_nothing)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._thread.call(self._disconnect)
        finally:
            self._thread.shutdown()

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        # Another connection's commit changes ``data_version``; this store's own writes (other
        # engines of this process on it) are counted in ``_written``.
        end = time.monotonic() + seconds
        written = self._written
        seen = self._data_version
        while True:
            if self._written != written or self._data_version != seen:
                return True  # (a change this store made, or that another waiter saw)
            version = await self._call(self._version_of_file)
            if version != self._data_version:
                self._data_version = version
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(POLL_SECONDS, left))

    # -- writes ------------

    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        creation = Creation.of(run, state, commit, lease, DIALECT)
        # (A check costs no round trip here: a run id taken already is told as such.)
        first = await self._db.transact(
            commits.create_run(creation, DIALECT, check=True), tell=True
        )
        return commits.numbered(commit.events, first) if commit is not None else []

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        script = commits.apply_commit(encode_commit(commit, DIALECT), DIALECT, own_clock=False)
        first = await self._db.transact(script, tell=True)
        return commits.numbered(commit.events, first)

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        script = requests.request_signal(request, DIALECT, own_clock=False)
        return await self._db.transact(script, tell=True)

    # -- leases and wake instants ------------

    async def next_wake(self) -> datetime | None:
        self._check_file()  # (one stat, not worth a trip to the store's thread)
        return await self._leases.next_wake()

    def _version_of_file(self, conn: sqlite3.Connection) -> int:
        self._check_file()
        return _data_version(conn)

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        return await self._leases.claim_runs(owner, now, expires, limit, own_clock=False)

    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        return await self._leases.acquire_run(
            run_id, owner, now, expires, force=force, own_clock=False
        )

    async def renew_leases(
        self,
        owner: str,
        expires: datetime,
        *,
        now: datetime | None = None,
        run_ids: Collection[str] | None = None,
    ) -> Sequence[Lease]:
        return await self._leases.renew_leases(owner, expires, now, run_ids, own_clock=False)

    async def release_runs(self, owner: str) -> Sequence[str]:
        return await self._leases.release_runs(owner)

    async def lease_of(self, run_id: str) -> Lease | None:
        return await self._leases.lease_of(run_id)

    # -- flows ------------

    async def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        return await self._flows.put_flow(flow, stored_at)

    async def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        return await self._flows.get_flow(flow_id, digest)

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        return await self._flows.latest_flow(flow_id)

    async def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        return await self._flows.flow_versions(flow_id)

    # -- reads ------------

    async def get_run(self, run_id: str) -> RunRecord:
        return await self._reads.get_run(run_id)

    async def load_run(self, run_id: str) -> RunSnapshot:
        return await load_snapshot(self._db, run_id)

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return await self._reads.list_runs(lifecycle)

    async def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        return await self._reads.run_ids(prefix, limit)

    async def prune_runs(
        self,
        ended_before: datetime,
        *,
        limit: int = PRUNE_BATCH,
        after: str = "",
        dry_run: bool = False,
    ) -> Sequence[str]:
        if dry_run:
            return await self._reads.prunable_runs(ended_before, limit, after)
        script = pruning.prune_runs(ended_before, limit, after, DIALECT)
        return await self._db.transact(script, tell=True)

    async def get_state(self, run_id: str) -> dict[str, Any]:
        return await self._reads.get_state(run_id)

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        return await self._reads.tokens(run_id, statuses)

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        return await self._reads.token(run_id, token_id)

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        return await self._reads.history(run_id, after)

    async def due_of(self, run_id: str) -> Sequence[DueEntry]:
        return await self._reads.due_of(run_id)

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return await self._reads.node_anchor(run_id, placement, item)

    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return await self._reads.node_anchors(run_id)

    async def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        return await self._reads.parks(run_id, key, placement, open_only)

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        return await self._reads.signal_answer(key)

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        return await self._reads.signal_request(request_id)

    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        return await self._reads.pending_requests(run_id)

    async def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
        return await self._reads.scatter_items(run_id, progress)

    # -- workers ------------

    async def record_worker(self, worker: WorkerRecord) -> None:
        await self._workers.record_worker(worker)

    async def workers(self) -> Sequence[WorkerRecord]:
        return await self._workers.workers()

    async def forget_worker(self, worker_id: str) -> bool:
        return await self._workers.forget_worker(worker_id)


def _nothing(conn: sqlite3.Connection) -> None:
    """Nothing to do but open the database (:meth:`SQLiteStore.open`)."""


def _data_version(conn: sqlite3.Connection) -> int:
    """A number that changes when another connection commits to the database."""
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0])


def _identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (None: there is none)."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return (found.st_dev, found.st_ino)
