"""The memory store's leases and wake instants: who holds each run, and when each run next
needs a worker (see :mod:`flowtide.store.base`), kept in a heap so that a claim takes the
earliest first; and who to tell when something changes (engines sharing the store in one
process)."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from flowtide.store.base import ENDED_LIFECYCLES, RUNNABLE_LIFECYCLES, Lease
from flowtide.store.memory.tables import Tables

__all__ = ["Leases"]


class Leases:
    """Leases on the runs of ``tables``, their wake instants, and who waits for a change."""

    def __init__(self, tables: Tables) -> None:
        self._watchers: set[asyncio.Event] = set()
        """Who waits in :meth:`wait_changed` (engines sharing this store in one process)."""
        self._on_request: list[Callable[[], None]] = []
        self._due = tables.due
        self._epochs = tables.epochs
        self._held = tables.held
        self._leases = tables.leases
        self._run = tables.run
        self._runs = tables.runs
        self._wake_heap = tables.wake_heap
        self._wake_order = tables.wake_order
        self._wakes = tables.wakes

    def hold(self, lease: Lease) -> None:
        old = self._leases.get(lease.run_id)
        if old is not None:
            self._held[old.owner].discard(lease.run_id)
        self._leases[lease.run_id] = lease
        self._epochs[lease.run_id] = lease.epoch
        self._held.setdefault(lease.owner, set()).add(lease.run_id)

    def let_go(self, run_id: str) -> None:
        lease = self._leases.pop(run_id, None)
        if lease is not None:
            self._held[lease.owner].discard(run_id)

    def _take(self, run_id: str, owner: str, expires: datetime) -> Lease:
        old = self._leases.get(run_id)
        same = old is not None and old.owner == owner
        epoch = self._epochs[run_id] if same else self._epochs[run_id] + 1
        self.hold(Lease(run_id, owner, epoch, expires))
        self.rewake(run_id)
        # (Whom it was taken from is said by this answer only: a lease read later does not.)
        taken_from = None if old is None or same else old.owner
        return Lease(run_id, owner, epoch, expires, taken_from)

    async def wait_changed(self, seconds: float) -> bool:
        changed = asyncio.Event()
        self._watchers.add(changed)
        try:
            async with asyncio.timeout(seconds):
                await changed.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self._watchers.discard(changed)

    def rewake(self, run_id: str, *, tell: bool = False) -> None:
        """Bring the run's wake instant up to date (see :mod:`flowtide.store.base`), and tell
        whoever waits for a change (``tell``: the engines of this process too)."""
        for watcher in self._watchers:
            watcher.set()
        for engine in list(self._on_request) if tell else ():
            engine()
        run = self._runs[run_id].record
        wake: datetime | None
        if run.lifecycle in ENDED_LIFECYCLES:
            wake = None
        else:
            due = self._due[run_id]
            first = min((when for when, _ in due.values()), default=None) if due else None
            lease = self._leases.get(run_id)
            if lease is not None:
                wake = lease.expires if first is None else min(lease.expires, first)
            elif run.lifecycle in RUNNABLE_LIFECYCLES:
                wake = run.created_at
            else:
                wake = first
        old = self._wakes.get(run_id)
        if old is not None and old[0] == wake:
            return
        if wake is None:
            self._wakes.pop(run_id, None)
            return
        order = next(self._wake_order)
        self._wakes[run_id] = (wake, order)
        heapq.heappush(self._wake_heap, (wake, order, run_id))
        if len(self._wake_heap) > 2 * len(self._wakes) + 64:
            # Replaced items wait at their place until they reach the top: drop them at once.
            self._wake_heap[:] = sorted((w, o, r) for r, (w, o) in self._wakes.items())

    def _first_wake(self) -> tuple[datetime, int, str] | None:
        """The heap's earliest item that is still its run's wake (stale items are dropped)."""
        heap = self._wake_heap
        while heap:
            when, order, run_id = heap[0]
            if self._wakes.get(run_id) == (when, order):
                return heap[0]
            heapq.heappop(heap)
        return None

    def next_wake(self) -> datetime | None:
        first = self._first_wake()
        return first[0] if first is not None else None

    def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        taken: list[Lease] = []
        passed: list[tuple[datetime, int, str]] = []
        seen: set[str] = set()
        while len(taken) < limit:
            first = self._first_wake()
            if first is None or first[0] > now:
                break
            heapq.heappop(self._wake_heap)
            run_id = first[2]
            lease = self._leases.get(run_id)
            if run_id in seen or (
                lease is not None and lease.owner != owner and lease.expires > now
            ):
                passed.append(first)  # (held by a live owner: its wake is that owner's)
                continue
            seen.add(run_id)
            del self._wakes[run_id]
            taken.append(self._take(run_id, owner, expires))
        for item in passed:
            heapq.heappush(self._wake_heap, item)
        return taken

    def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        run = self._run(run_id).record
        if run.lifecycle in ENDED_LIFECYCLES:
            return None
        lease = self._leases.get(run_id)
        if lease is not None and lease.owner != owner and lease.expires > now and not force:
            return None
        return self._take(run_id, owner, expires)

    def renew_leases(
        self,
        owner: str,
        expires: datetime,
        *,
        now: datetime | None = None,
        run_ids: Collection[str] | None = None,
    ) -> Sequence[Lease]:
        held = self._held.get(owner, set())
        renewed = sorted(held if run_ids is None else held.intersection(run_ids))
        for run_id in renewed:
            self._leases[run_id] = Lease(run_id, owner, self._leases[run_id].epoch, expires)
            self.rewake(run_id)
        return [self._leases[run_id] for run_id in renewed]

    def release_runs(self, owner: str) -> Sequence[str]:
        released = sorted(self._held.pop(owner, set()))
        for run_id in released:
            del self._leases[run_id]
            self.rewake(run_id)
        return released

    def lease_of(self, run_id: str) -> Lease | None:
        self._run(run_id)
        return self._leases.get(run_id)

    def on_request(self, wake: Callable[[], None]) -> Callable[[], None]:
        self._on_request.append(wake)
        return lambda: self._on_request.remove(wake)
