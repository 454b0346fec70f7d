"""Leases: a worker holds each run it drives, and keeps holding it by renewing, every third of
the lease's time, the leases of all the runs it drives in one store call (not that of a run it
has let go and is giving back: it expires, should the store not let it be given back).

A worker that stops renewing (it died, froze, or lost the store) loses its runs when their
leases expire: any other worker then takes them over (see :mod:`flowtide.store.base`), and counts
it (:func:`count_takeovers`). A worker that finds, on renewing, that a run was taken from it
drops the run from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from flowtide.clock import Clock, isoformat
from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import RunWarning
from flowtide.engine.run._commit import commit_step
from flowtide.engine.worker.instruments import EngineInstruments
from flowtide.printable import printable
from flowtide.store.base import Commit, Lease, Store, StoreConflict, StoreDown, StoreError

__all__ = [
    "LEASE_TTL",
    "LeaseRenewer",
    "SetAside",
    "aside_owner",
    "count_takeovers",
    "give_back",
    "is_aside",
    "short_id",
    "worker_id",
]

log = logging.getLogger("flowtide.engine")

LEASE_TTL = timedelta(seconds=30)
"""How long a run stays held by a worker that stops renewing its lease (it died, or lost the
store): after that, any other worker takes the run over."""


def worker_id() -> str:
    """A worker id unique to one engine's life: host, process id and a random part (a process
    started again is another worker: it never takes the dead one's leases for its own)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def aside_owner(owner: str) -> str:
    """The owner name under which worker ``owner`` holds the runs it set aside."""
    return f"{owner}:aside"


def is_aside(owner: str) -> bool:
    """Whether ``owner`` is the name a worker holds the runs it set aside under."""
    return owner.endswith(aside_owner(""))


def count_takeovers(instruments: EngineInstruments, leases: Iterable[Lease | None]) -> None:
    """Tell ``instruments`` of each lease just taken from another worker's: one that had
    expired, or a live one taken with ``force``. Not a run taken from nobody or from this
    worker, nor one a worker had set aside (that hold ends by design)."""
    for lease in leases:
        taken_from = lease.taken_from if lease is not None else None
        if taken_from is not None and not is_aside(taken_from):
            instruments.taken_over()


class Holder(Protocol):
    """What the renewer sees of a held run's executor: its lease, or the lease its next commit
    takes (see ``Commit.take``)."""

    lease: Lease | None
    taking: Lease | None


class LeaseRenewer:
    """Renews ``owner``'s leases while ``held()`` has any run with a lease; ``lost(holder)`` is
    called for each held run another worker has taken (that worker counts it)."""

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

    def _holding(self) -> list[str]:
        """The runs held here with a lease (or taking one with their next commit)."""
        return [
            run_id
            for run_id, h in self._held().items()
            if h.lease is not None or h.taking is not None
        ]

    async def _loop(self) -> None:
        while self._holding():
            await self._clock.sleep(self._ttl / 3)
            # Only the runs held here: one let go and being given back keeps the lease it had,
            # and is taken over once that expires if the store never lets it be given back.
            held = self._holding()
            if not held:
                continue
            try:
                now = self._clock.now()
                renewed = await self._store.renew_leases(
                    self._owner, now + self._ttl, now=now, run_ids=held
                )
            except StoreError as exc:
                # (A store that does not answer says so itself, once each way.)
                level = logging.DEBUG if isinstance(exc, StoreDown) else logging.WARNING
                log.log(level, "cannot renew leases: %s", exc)
                continue
            kept = {lease.run_id: lease for lease in renewed}
            for run_id, holder in list(self._held().items()):
                lease = kept.get(run_id)
                if lease is not None:
                    holder.lease = lease
                elif holder.lease is not None and await self._taken(run_id):
                    log.warning("run %s was taken over by another worker", printable(run_id))
                    self._lost(holder)

    async def _taken(self, run_id: str) -> bool:
        """Whether another owner holds the run now. (A lease not renewed may also be one this
        worker has just given back, or the run's end, committed while the executor that did it
        had not heard back yet: that executor lets go of the run itself.)"""
        try:
            now = await self._store.lease_of(run_id)
        except StoreError:
            return False  # (looked at again at the next renewal)
        return now is not None and now.owner != self._owner


class SetAside:
    """Runs a worker cannot drive (their nodes do not resolve there), set aside for ``wait``:
    held under an owner name of their own (``<owner>:aside``), so that no worker, that one
    included, takes them again before then; nothing else of them changes. The first time a
    run is set aside, a warning saying why goes into its history and the worker's log (one per
    run)."""

    def __init__(self, store: Store, clock: Clock, owner: str, wait: timedelta) -> None:
        self.owner = aside_owner(owner)
        self._worker = owner
        self._store = store
        self._clock = clock
        self._wait = wait
        self._warned: set[str] = set()

    async def put(self, run_id: str, why: Exception, missing: Sequence[str] = ()) -> None:
        """Set the run aside (``missing``: the node ids it needs that do not resolve here),
        once this worker has given it back: unless another worker has taken it meanwhile (one
        that can drive it, maybe, whose lease is not to be taken from it)."""
        now = self._clock.now()
        later = now + self._wait
        lease = await self._store.acquire_run(run_id, self.owner, now, later)
        if lease is None or run_id in self._warned:
            return
        self._warned.add(run_id)
        if missing:
            named = ", ".join(repr(m) for m in missing)
            log.warning(
                "run %s cannot be driven here: %s not registered here (a --nodes module must "
                "register %s); it waits for a worker that has %s",
                short_id(run_id),
                f"nodes {named} are" if len(missing) > 1 else f"node {named} is",
                *(("them", "them") if len(missing) > 1 else ("it", "it")),
            )
        else:
            log.warning("run %s cannot be driven here: %s", short_id(run_id), why)
        warning = event_record(
            RunWarning(
                message=f"worker {self._worker} cannot drive this run: {why}; it waits for a "
                f"worker that can (tried again from {isoformat(later)})",
            ),
            run_id,
            now,
        )
        await commit_step(self._store, Commit(run_id, events=[warning], lease=lease), self._clock)

    async def defer(self, run_id: str, delay: timedelta) -> None:
        """Set the run aside for ``delay``, quietly (nothing is wrong with it: a deadline of it
        has not come yet on the store's clock). Given back with :meth:`put`'s owner name."""
        now = self._clock.now()
        with contextlib.suppress(StoreError):
            await self._store.acquire_run(run_id, self.owner, now, now + delay, force=True)


def short_id(run_id: str) -> str:
    """The prefix of a run id that logs show (a character that does not print escaped, so an id
    cannot forge a log line)."""
    return printable(run_id[:12])


async def give_back(store: Store, clock: Clock, lease: Lease) -> bool:
    """Give a run back, untouched (if it was taken already, nothing is done); False if the
    store stays down (its lease is kept: see :meth:`HeldRuns.give_back
    <flowtide.engine.worker.holding.HeldRuns.give_back>`)."""
    try:
        await commit_step(store, Commit(lease.run_id, lease=lease, release=True), clock)
    except StoreConflict:
        pass
    except StoreUnavailableError:
        return False
    return True
