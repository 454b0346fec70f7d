"""Leases: a worker holds each run it drives, and keeps holding it by renewing, every third of
the lease's time, all the leases it holds in one store call.

A worker that stops renewing (it died, froze, or lost the store) loses its runs when their
leases expire: any other worker then takes them over (see :mod:`flowtide.store.base`). A worker
that finds, on renewing, that a run was taken from it drops the run from memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Protocol

from flowtide.clock import Clock, isoformat
from flowtide.engine._commit import commit_step
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import RunWarning
from flowtide.store.base import Commit, Lease, Store, StoreError

__all__ = ["LEASE_TTL", "LeaseRenewer", "set_aside", "worker_id"]

log = logging.getLogger("flowtide.engine")

LEASE_TTL = timedelta(seconds=30)
"""How long a run stays held by a worker that stops renewing its lease (it died, or lost the
store): after that, any other worker takes the run over."""


def worker_id() -> str:
    """A worker id unique to one engine's life: host, process id and a random part (a process
    started again is another worker: it never takes the dead one's leases for its own)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Holder(Protocol):
    """What the renewer sees of a held run's executor."""

    lease: Lease | None


class LeaseRenewer:
    """Renews ``owner``'s leases while ``held()`` has any run with a lease; ``lost(holder)`` is
    called for each held run another worker has taken."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        owner: str,
        ttl: timedelta,
        held: Callable[[], Mapping[str, Holder]],
        lost: Callable[[Holder], None],
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._ttl = ttl
        self._held = held
        self._lost = lost
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Renew from now on, while any run is held (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _holding(self) -> bool:
        return any(h.lease is not None for h in self._held().values())

    async def _loop(self) -> None:
        while self._holding():
            await self._clock.sleep(self._ttl / 3)
            try:
                renewed = await self._store.renew_leases(self._owner, self._clock.now() + self._ttl)
            except StoreError as exc:
                log.warning("cannot renew leases: %s", exc)
                continue
            kept = {lease.run_id: lease for lease in renewed}
            for run_id, holder in list(self._held().items()):
                lease = kept.get(run_id)
                if lease is not None:
                    holder.lease = lease
                elif holder.lease is not None:
                    log.warning("run %s was taken over by another worker", run_id)
                    self._lost(holder)


async def set_aside(
    store: Store,
    clock: Clock,
    aside: str,
    run_id: str,
    why: Exception,
    wait: timedelta,
    warn: bool,
) -> None:
    """Set a run that a worker cannot drive aside for ``wait``: held under the owner name
    ``aside`` (so that no worker, that one included, takes it again before then), nothing else
    of it changed; with ``warn``, a warning saying why goes into its history."""
    now = clock.now()
    later = now + wait
    lease = await store.acquire_run(run_id, aside, now, later, force=True)
    if lease is None or not warn:
        return
    worker = aside.removesuffix(":aside")
    warning = event_record(
        RunWarning(
            message=f"worker {worker} cannot drive this run: {why}; it waits for a worker "
            f"that can (tried again from {isoformat(later)})",
        ),
        run_id,
        now,
    )
    await commit_step(store, Commit(run_id, events=[warning], lease=lease), clock)
