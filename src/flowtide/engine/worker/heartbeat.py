"""Heartbeats: an executing engine records in the store who it is, what it holds, the node ids
it implements and the runs it cannot drive, when it starts and every third of its lease term,
and removes the record when it closes cleanly (``flowtide workers`` lists them).

Instants come from the engine's clock. A run the engine sets aside for want of nodes is
recorded at once (one heartbeat for all the runs set aside meanwhile), so that a client can say
which node the run waits for (:func:`waiting_for`).

A worker that implements those nodes takes such a run over after its next heartbeat. Several
may see it set aside at once: each gives it back in the name of the worker that set it aside,
under that worker's lease (its epoch fences the others out), and only the one that gave it back
takes it, as any worker takes a run nobody holds; so one of them at most drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from flowtide.clock import Clock
from flowtide.engine.worker.leases import aside_owner, short_id
from flowtide.store.base import (
    Commit,
    Lease,
    Store,
    StoreConflict,
    StoreDown,
    StoreError,
    StoreUnusableError,
    WorkerRecord,
)

__all__ = ["FORGOTTEN_AFTER", "MOST_WAITING", "STALE_AFTER", "Heartbeat", "is_live", "waiting_for"]

log = logging.getLogger("flowtide.engine")

STALE_AFTER = 3
"""A worker not seen for this many of its lease terms is taken for gone (it beats three times
a term)."""

FORGOTTEN_AFTER = timedelta(days=7)
"""The heartbeat of a worker not seen for this long (it died, long ago) is removed by the next
worker that looks at the heartbeats."""

MOST_WAITING = 1000
"""At most this many runs set aside are named in one heartbeat (the latest)."""


def is_live(worker: WorkerRecord, now: datetime) -> bool:
    """Whether ``worker`` was seen within :data:`STALE_AFTER` lease terms of ``now``."""
    return now - worker.last_seen <= timedelta(seconds=STALE_AFTER * worker.lease_ttl)


def waiting_for(run_id: str, lease: Lease | None, workers: Iterable[WorkerRecord]) -> list[str]:
    """The node ids ``run_id`` waits for: those the worker that set it aside (and holds it so,
    ``lease``) lacks; none once any worker has taken it since."""
    if lease is None:
        return []
    for worker in workers:
        if lease.owner == aside_owner(worker.worker_id):
            return list(worker.waiting.get(run_id, []))
    return []


class Heartbeat:
    """Records ``owner``'s heartbeat every third of ``ttl`` once started; ``held()`` counts the
    runs it holds, ``nodes()`` gives the node ids it implements. A run set aside is named
    (:meth:`waits`) for ``keep`` after it was last set aside, or until this engine drives it
    (:meth:`drives`). After each heartbeat, the runs other live workers set aside for want of
    nodes this one implements are taken over and handed to ``adopt`` (they need not wait for
    their set-aside to end), and heartbeats older than :data:`FORGOTTEN_AFTER` are removed."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        owner: str,
        ttl: timedelta,
        held: Callable[[], int],
        nodes: Callable[[], Sequence[str]],
        keep: timedelta,
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._ttl = ttl
        self._held = held
        self._nodes = nodes
        self._keep = keep
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._started_at: datetime | None = None
        self._waiting: dict[str, tuple[list[str], datetime]] = {}
        self._task: asyncio.Task[None] | None = None
        self._due: asyncio.Event | None = None
        self._failing = False
        self.adopt: Callable[[Sequence[Lease], datetime], Awaitable[object]] | None = None
        self.before: Callable[[], Awaitable[None]] | None = None
        """Awaited before each beat (the engine's clock is set by the store's)."""

    def start(self) -> None:
        """Beat now, then every third of the lease term (idempotent)."""
        if self._task is None:
            self._due = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop(self._due))

    def waits(self, run_id: str, nodes: Sequence[str]) -> None:
        """``run_id`` was set aside: it waits for a worker with ``nodes``."""
        self._waiting.pop(run_id, None)  # (the latest last, for MOST_WAITING)
        self._waiting[run_id] = (sorted(nodes), self._clock.now())
        if self._due is not None:
            self._due.set()

    def drives(self, run_id: str) -> None:
        """This engine drives ``run_id`` now: it waits no more."""
        if self._waiting.pop(run_id, None) is not None and self._due is not None:
            self._due.set()

    async def stop(self) -> None:
        """Stop beating and remove the heartbeat (a clean close)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # (it stopped beating already; closing goes on)
            log.warning("the heartbeat stopped: %s: %s", type(exc).__name__, exc)
        with contextlib.suppress(StoreError):
            await self._store.forget_worker(self._owner)

    def record(self) -> WorkerRecord:
        """The heartbeat as of now."""
        now = self._clock.now()
        for run_id, (_, since) in list(self._waiting.items()):
            if now - since > self._keep:
                del self._waiting[run_id]
        latest = list(self._waiting.items())[-MOST_WAITING:]
        return WorkerRecord(
            worker_id=self._owner,
            host=self._host,
            pid=self._pid,
            started_at=self._started_at or now,
            last_seen=now,
            lease_ttl=self._ttl.total_seconds(),
            runs_held=self._held(),
            nodes=sorted(set(self._nodes())),
            waiting=_waiting_json(dict(latest)),
        )

    async def _loop(self, due: asyncio.Event) -> None:
        while True:
            due.clear()
            if self.before is not None:
                with contextlib.suppress(StoreError):  # (the beat says so, if it lasts)
                    await self.before()
            if self._started_at is None:
                self._started_at = self._clock.now()
            await self._beat()
            if self.adopt is not None:
                try:
                    await self._adopt(self.adopt)
                except StoreError as exc:
                    log.debug("cannot take over the runs set aside elsewhere: %s", exc)
            timer = self._clock.call_at(self._clock.now() + self._ttl / 3, due.set)
            try:
                await due.wait()
            finally:
                timer.cancel()

    async def _adopt(self, take: Callable[[Sequence[Lease], datetime], Awaitable[object]]) -> None:
        """Take over the runs other live workers hold set aside for want of nodes this one
        implements."""
        now = self._clock.now()
        mine = set(self._nodes())
        for worker in await self._store.workers():
            if now - worker.last_seen > FORGOTTEN_AFTER:
                await self._store.forget_worker(worker.worker_id)
            if worker.worker_id == self._owner or not is_live(worker, now):
                continue
            aside = aside_owner(worker.worker_id)
            for run_id, missing in worker.waiting.items():
                if not missing or not set(missing) <= mine:
                    continue
                held = await self._store.lease_of(run_id)
                if held is None or held.owner != aside or held.expires <= now:
                    continue  # (taken meanwhile, or given back: claimed as any other run)
                try:
                    await self._store.commit(Commit(run_id, lease=held, release=True))
                except StoreConflict:
                    continue  # (another worker gave it back first, and takes it)
                lease = await self._store.acquire_run(run_id, self._owner, now, now + self._ttl)
                if lease is not None:
                    by = worker.worker_id
                    log.info("taking over run %s, set aside by %s", short_id(run_id), by)
                    await take([lease], now)

    async def _beat(self) -> None:
        try:
            await self._store.record_worker(self.record())
        except StoreUnusableError as exc:
            # (Damaged, read-only, deleted: the sweeper stops the worker on it, saying so.)
            log.debug("cannot record this worker's heartbeat: %s", exc)
            self._failing = True
        except StoreError as exc:
            if not self._failing and not isinstance(exc, StoreDown):
                # (Once until it works again; a store that does not answer says so itself.)
                log.warning("cannot record this worker's heartbeat: %s", exc)
            self._failing = True
        else:
            self._failing = False


def _waiting_json(waiting: Mapping[str, tuple[list[str], datetime]]) -> dict[str, list[str]]:
    return {run_id: nodes for run_id, (nodes, _) in waiting.items()}
