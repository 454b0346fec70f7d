"""The PostgreSQL store: many workers, on many machines, sharing one database.

Everything lives in one schema of the database (``flowtide`` unless told otherwise), created and
migrated by :meth:`PostgresStore.open`; several installations (or test sessions) each keep to
their own schema. Connections come from a pool (psycopg 3, async); every statement is in
``queries.sql``, every parameter is bound.

A commit is one transaction that locks its run's row first: writers of one run wait for one
another there, where the lease fence and the run's lifecycle are checked, then the
expectations, then the writes — sent whole as one statement, or the careful way when that was
refused (:mod:`flowtide.store.postgres.commits`). Claims take runs whose
wake instant has come with ``FOR UPDATE SKIP LOCKED``, so that overlapping claims never hand one
run to two owners. Other processes learn of new work through ``NOTIFY``
(:mod:`flowtide.store.postgres.notify`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncRawCursor
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool

from flowtide.store.base import (
    PRUNE_BATCH,
    ClockReading,
    Commit,
    CommitOutcomeUnknown,
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
    StoreDown,
    StoreError,
    StoreOpenError,
    TokenRecord,
    TokenStatus,
    WorkerRecord,
)
from flowtide.store.postgres import snapshot
from flowtide.store.postgres.commits import (
    GUARD_FAILED,
    Prepared,
    Whole,
    created,
    creates_whole,
    prepare,
    sends_whole,
    whole,
)
from flowtide.store.postgres.connector import PostgresConnector, put
from flowtide.store.postgres.errors import Target, open_error, store_error, unencodable
from flowtide.store.postgres.group import Groups
from flowtide.store.postgres.notify import ChangeListener
from flowtide.store.postgres.outage import POOL_PREFIX, Outage, quiet_pool_warnings
from flowtide.store.postgres.queries import Q, channel_name, check_schema_name, with_schema
from flowtide.store.postgres.rows import DIALECT, Params
from flowtide.store.postgres.schema import migrate
from flowtide.store.sqlcore import commits, pruning, requests
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.flows import SQLFlows
from flowtide.store.sqlcore.leases import SQLLeases
from flowtide.store.sqlcore.reads import SQLReads
from flowtide.store.sqlcore.workers import SQLWorkers

__all__ = ["PostgresStore"]

_CONNECT_TIMEOUT = 10
"""Seconds to wait for a connection, unless the URL says (``connect_timeout``)."""
_OPEN = frozenset({TransactionStatus.INTRANS, TransactionStatus.INERROR})
"""A connection's states in a transaction (begun, or failed and not yet rolled back)."""
Connection = psycopg.AsyncConnection[Any]


class PostgresStore(Store):
    """A store in a PostgreSQL database (``url``: a ``postgresql://`` URL or a libpq
    connection string), in its own ``schema``, through a pool of ``min_size`` to ``max_size``
    connections. ``async with PostgresStore(url) as store`` opens and closes it; a store not
    yet opened opens on its first use."""

    shared = True
    own_clock = True

    def __init__(
        self, url: str, *, schema: str = "flowtide", min_size: int = 1, max_size: int = 10
    ) -> None:
        check_schema_name(schema)
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(f"a pool of {min_size} to {max_size} connections")
        self._target = Target.of(url)
        self._schema = schema
        self._channel = channel_name(schema)
        self._min_size = min_size
        self._max_size = max_size
        self._conninfo = url
        if self._target.readable and "connect_timeout" not in conninfo_to_dict(url):
            self._conninfo = make_conninfo(url, connect_timeout=_CONNECT_TIMEOUT)
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self._listener = ChangeListener(self._conninfo, self._channel)
        self._outage = Outage(self._target.name)
        self._groups = Groups(self._alone, self._together, _run_of)
        """Commits sent whole that come while one is in flight share a transaction."""
        self._snapshots = snapshot.Snapshots(self._rows)
        connector = PostgresConnector(self._rows, self._rows_together, self._transaction)
        self._db = connector
        self._reads = SQLReads(connector)
        self._leases = SQLLeases(connector)
        self._flows = SQLFlows(connector)
        self._workers = SQLWorkers(connector)

    def __repr__(self) -> str:
        return f"PostgresStore({self._target.name}, schema={self._schema!r})"

    @property
    def schema(self) -> str:
        """The schema of the database that holds this store's tables."""
        return self._schema

    # -- opening and closing ------------

    async def open(self) -> None:
        async with self._opening:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            if self._pool is not None:
                return
            if not self._target.readable:
                raise StoreOpenError(f"cannot open a PostgreSQL store: {self._target.name}")
            await self._migrate()
            pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
                self._conninfo,
                min_size=self._min_size,
                max_size=self._max_size,
                kwargs={"autocommit": True},
                configure=self._configure,
                name=f"{POOL_PREFIX}{self._schema}",
                open=False,
            )
            try:
                await pool.open(wait=True, timeout=float(_CONNECT_TIMEOUT))
            except psycopg.Error as error:
                await pool.close()
                raise open_error(error, self._target) from None
            except BaseException:  # (given up: a pool left open would keep connecting, and
                # its workers would not end; one stuck connecting is not waited for)
                await pool.close(timeout=0)
                raise
            self._pool = pool

    async def _migrate(self) -> None:
        """Connect once, on a connection of our own, and bring the schema up to date."""
        try:
            connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as error:
            raise open_error(error, self._target) from None
        try:
            async with connection:
                await self._configure(connection)
                await migrate(connection, self._schema, self._target.name)
        except psycopg.Error as error:
            raise open_error(error, self._target) from None

    async def _configure(self, connection: Connection) -> None:
        """Every connection: the store's schema as its search path, instants in UTC, JSON
        columns read as their text (decoded by the store), each statement planned once: prepared
        at its first use (``prepare=True`` where it is run) with a generic plan."""
        quiet_pool_warnings(connection)
        connection.adapters.register_loader("json", TextLoader)
        await connection.execute(with_schema("set_search_path", self._schema))
        await connection.execute(Q["set_time_zone"])
        await connection.execute(Q["set_plan_cache_mode"])
        await connection.execute(Q["set_channel"], {"channel": self._channel})

    async def close(self) -> None:
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        await self._listener.close()
        if pool is not None:
            await pool.close()

    async def clock_offset(self, now: Callable[[], datetime]) -> ClockReading:
        """The database's clock read between two readings of ``now``, on a connection already
        taken from the pool (waiting for one is not part of the round trip)."""
        if not self.own_clock:
            return await super().clock_offset(now)
        try:
            with self.busy():
                pool = await self._connections()
                async with pool.connection() as conn:
                    sent = now()
                    cursor = await conn.execute(Q["clock_now"])
                    back = now()
                    row = await cursor.fetchone()
                    self._outage.answered()
        except psycopg.Error as error:
            raise self._failed(error) from error
        assert row is not None
        database: datetime = row[0]
        return ClockReading(database - (sent + (back - sent) / 2), back - sent)

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        await self._connections()  # (an unusable store says so, rather than waiting)
        return await self._listener.wait(seconds, wakes_only=wakes_only)

    # -- connections ------------

    async def _connections(self) -> AsyncConnectionPool[Connection]:
        pool = self._pool
        if pool is None:
            await self.open()
            pool = self._pool
            assert pool is not None
        return pool

    @asynccontextmanager
    async def _transaction(self, begin: str | None = "begin") -> AsyncIterator[Connection]:
        """A connection in a transaction, in pipeline mode (statements are sent as they come
        and wait for one another only when a result is read); committed at the end, rolled back
        on an error. ``begin`` None: the connection as it is (autocommit, no pipeline), for one
        statement that is a transaction of its own.

        ``BEGIN`` and ``COMMIT`` are sent as statements of the pipeline: the whole ends in one
        sync (psycopg's ``transaction()`` would add one more round trip).

        The database lost once ``COMMIT`` (or the statement that commits itself) is sent:
        whether it applied the transaction is unknown
        (:class:`~flowtide.store.base.CommitOutcomeUnknown`), and sending it again could apply
        it twice."""
        committing = begin is None
        try:
            with self.busy():
                pool = await self._connections()
                async with pool.connection() as conn:
                    if begin is None:
                        yield conn
                        self._outage.answered()
                        return
                    try:
                        async with conn.pipeline():
                            await conn.execute(Q[begin])
                            yield conn
                            committing = begin == "begin"  # (a read-only one changes nothing)
                            await conn.execute(Q["commit"])
                        self._outage.answered()
                    finally:
                        if conn.info.transaction_status in _OPEN:
                            # Refused, or failed: nothing of it stays. (A connection that broke
                            # is left to the pool, which drops it; the error in flight is the
                            # one told.)
                            with contextlib.suppress(psycopg.Error):
                                await conn.rollback()
        except psycopg.Error as error:
            if error.sqlstate == GUARD_FAILED:
                raise _GuardRefused from error
            failure = self._failed(error)
            if committing and isinstance(failure, StoreDown):
                raise CommitOutcomeUnknown(f"{failure} (while committing)") from error
            raise failure from error
        except UnicodeEncodeError as error:
            raise unencodable(error) from error

    def _failed(self, error: psycopg.Error) -> StoreError:
        """The store's error for ``error``; a database that does not answer is told once (see
        :mod:`flowtide.store.postgres.outage`)."""
        failure = store_error(error, self._target)
        if isinstance(failure, StoreDown):
            self._outage.failed(str(failure))
        return failure

    async def _rows_together(self, statements: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        """The rows of each statement (its text and parameters), at one snapshot of the
        database: sent together in one read-only transaction, answered in one round trip."""
        async with self._transaction("begin_snapshot") as conn:
            cursors = [
                await conn.execute(statement, params, prepare=True)
                for statement, params in statements
            ]
        return [await cursor.fetchall() for cursor in cursors]

    async def _rows(self, statement: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        """The rows of one statement (its text), run on its own (autocommit)."""
        try:
            with self.busy():
                pool = await self._connections()
                async with pool.connection() as conn:
                    cursor = await conn.execute(statement, params, prepare=True)
                    rows = [] if cursor.description is None else await cursor.fetchall()
                    self._outage.answered()
                    return rows
        except psycopg.Error as error:
            raise self._failed(error) from error
        except UnicodeEncodeError as error:
            raise unencodable(error) from error

    # -- writes ------------

    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        creation = Creation.of(run, state, commit, lease, DIALECT, own_clock=self.own_clock)
        if creates_whole(creation):  # (one statement: a run id taken already fails it)
            first = (await self._send([created(creation)]))[0]
        else:  # (read first if more than a run id taken already may refuse it: a round trip)
            script = commits.create_run(creation, DIALECT, check=creation.may_be_refused)
            first = await self._db.transact(script)
        return commits.numbered(creation.step.commit.events, first)

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        prepared = prepare(commit)
        if prepared.take is not None and self.own_clock:
            prepared.take["now"] = None  # (the lease is held from the database's clock)
        if sends_whole(prepared):
            first = await self._groups.send(prepared)
        else:
            first = await self._careful(prepared)
        return commits.numbered(commit.events, first)

    async def _alone(self, prepared: Prepared) -> int:
        """A commit sent whole, on its own (the careful way if its guard refused it); the seq
        of its first event."""
        try:
            return (await self._together([prepared]))[0]
        except _GuardRefused:
            return await self._careful(prepared)  # (tells why, or applies it: its run changed)

    async def _together(self, group: list[Prepared]) -> list[int]:
        """Commits sent whole in one transaction (one round trip); each one's first seq. A lone
        commit that wakes no other run is one statement, a transaction of its own."""
        return await self._send([whole(p, own_clock=self.own_clock) for p in group])

    async def _send(self, sent: list[Whole]) -> list[int]:
        """Statements of commits sent whole (or of new runs), in one transaction; each one's
        first seq."""
        if len(sent) == 1 and not sent[0].then:
            async with self._transaction(None) as conn:
                cursor = AsyncRawCursor(conn)
                await cursor.execute(sent[0].statement, sent[0].params, prepare=True)
                rows = [await cursor.fetchone()]
        else:
            async with self._transaction() as conn:
                cursors = []
                for commit in sent:
                    cursors.append(AsyncRawCursor(conn))
                    await cursors[-1].execute(commit.statement, commit.params, prepare=True)
                    await put(conn, commit.then)
            rows = [await cursor.fetchone() for cursor in cursors]
        firsts = []
        for row in rows:
            assert row is not None
            firsts.append(row[0] + 1)
        return firsts

    async def _careful(self, prepared: Prepared) -> int:
        """A commit checked on its run as read (two round trips); the seq of its first event."""
        script = commits.apply_commit(prepared, DIALECT, own_clock=self.own_clock)
        return await self._db.transact(script)

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        script = requests.request_signal(request, DIALECT, own_clock=self.own_clock)
        return await self._db.transact(script)

    # -- leases and wake instants ------------

    async def next_wake(self) -> datetime | None:
        return await self._leases.next_wake()

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        return await self._leases.claim_runs(owner, now, expires, limit, own_clock=self.own_clock)

    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        return await self._leases.acquire_run(
            run_id, owner, now, expires, force=force, own_clock=self.own_clock
        )

    async def renew_leases(
        self,
        owner: str,
        expires: datetime,
        *,
        now: datetime | None = None,
        run_ids: Collection[str] | None = None,
    ) -> Sequence[Lease]:
        return await self._leases.renew_leases(
            owner, expires, now, run_ids, own_clock=self.own_clock
        )

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
        return await self._snapshots.load(run_id)

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
        return await self._db.transact(pruning.prune_runs(ended_before, limit, after, DIALECT))

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

    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        return await self._reads.pending_requests(run_id)

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        return await self._reads.signal_request(request_id)

    async def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
        return await self._reads.scatter_items(run_id, progress)

    # -- workers ------------

    async def record_worker(self, worker: WorkerRecord) -> None:
        await self._workers.record_worker(worker)

    async def workers(self) -> Sequence[WorkerRecord]:
        return await self._workers.workers()

    async def forget_worker(self, worker_id: str) -> bool:
        return await self._workers.forget_worker(worker_id)


def _run_of(prepared: Prepared) -> str:
    return prepared.commit.run_id


class _GuardRefused(Exception):
    """A commit sent whole was refused by its guard: nothing of it was applied."""
