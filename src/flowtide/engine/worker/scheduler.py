"""The sweeper: one task per engine that takes the runs whose wake instant has come.

The store keeps each run's wake instant (see :mod:`flowtide.store.base`): at once for a run
that needs a worker (new, handed back, or whose worker's lease expired), the earliest due entry
of a parked run (a wait, a retry backoff, a park deadline, an escalation timer, the run's
deadline), and, for a run a worker holds, the earlier of its lease's expiry and its next due
entry. The sweeper asks the store for the earliest wake instant, sleeps until then through the
clock (one timer, re-armed when a nearer instant is written: :meth:`Sweeper.wake`), then claims
the runs that are due (``claim_runs``: each comes with a lease) and hands them to the engine,
which rebuilds or finds each one and fires its due entries. The cost does not depend on how many
runs wait: the store's index on the wake instant gives the earliest.

On a store other processes write to (``Store.shared``), the sweeper also waits for their notices
(``Store.wait_changed``), and looks again at least every ``poll`` seconds, so that a notice lost
only delays.

A store that is down or busy is asked again a second later; one that cannot be used as it is
(:class:`~flowtide.store.base.StoreUnusableError`: damaged, read-only, its file replaced) stops
the sweeper, which logs why once and answers :meth:`Sweeper.broken` with the error.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowtide.clock import Clock, TimerHandle
from flowtide.engine.worker.instruments import NO_INSTRUMENTS, EngineInstruments, seconds
from flowtide.store.base import Lease, Store, StoreDown, StoreError, StoreUnusableError

log = logging.getLogger("flowtide.sweeper")

__all__ = ["BATCH", "RECHECK", "Sweeper", "SweeperStatistics"]

BATCH = 100
"""How many runs one claim takes at most."""

STOP_WITHIN = 5.0
"""How long (seconds, real time) closing waits for the sweeper's task to stop."""

RECHECK = timedelta(seconds=1)
"""How soon the sweeper looks again when every run due now is held by another live worker
(whose own sweeper will take it)."""


@dataclass(frozen=True, slots=True)
class SweeperStatistics:
    """An immutable snapshot of the sweeper's counters."""

    claimed: int
    batches: int
    wakeups: int
    armed_for: datetime | None


class Sweeper:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        owner: str,
        lease_ttl: timedelta,
        take: Callable[[Sequence[Lease], datetime], Awaitable[int]],
        *,
        batch: int = BATCH,
        poll: float = 1.0,
        room: Callable[[], int] | None = None,
        before: Callable[[], Awaitable[None]] | None = None,
        instruments: EngineInstruments = NO_INSTRUMENTS,
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._ttl = lease_ttl
        self._take = take
        self._batch = batch
        self._poll = poll
        self._room = room
        """How many more runs the engine may take now (None: no limit)."""
        self._before = before
        """Awaited before each look for work (the engine's clock is set by the store's)."""
        self._instruments = instruments
        """Told how late each claim is (see :meth:`_loop`)."""
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._unwatch: Callable[[], None] | None = None
        self._event: asyncio.Event | None = None
        self._timer: TimerHandle | None = None
        self._armed_for: datetime | None = None
        self._claimed = 0
        self._batches = 0
        self._wakeups = 0
        self._broken: asyncio.Future[StoreUnusableError] | None = None
        self._watched = False

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._event = asyncio.Event()
            if self._broken is None or self._broken.done():
                self._broken = asyncio.get_running_loop().create_future()
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._loop())
            if self._store.shared:
                self._watcher = loop.create_task(self._notices(self._event))
            elif self._unwatch is None:
                # (Engines of this process share the store: a request wakes the run's holder.)
                self._unwatch = self._store.on_request(self.wake)

    def wake(self, when: datetime | None = None) -> None:
        """A wake instant may have moved (to ``when``): look again if nearer than the armed
        one."""
        if self._event is None:
            return
        if when is None or self._armed_for is None or when < self._armed_for:
            self._event.set()

    async def broken(self) -> StoreUnusableError:
        """Wait until the sweeper stops because its store cannot be used (it never stops for
        anything else but :meth:`close`), and return why."""
        if self._broken is None:
            self._broken = asyncio.get_running_loop().create_future()
        self._watched = True
        return await asyncio.shield(self._broken)

    def _stop(self, error: StoreUnusableError) -> None:
        """Stop looking for work: the store cannot be used as it is."""
        if self._broken is not None and not self._broken.done():
            # (Said once; by whoever waits on broken() when someone does.)
            log.log(logging.INFO if self._watched else logging.ERROR, "sweeper: stopped: %s", error)
            self._broken.set_result(error)
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
        if self._timer is not None:
            self._timer.cancel()

    def statistics(self) -> SweeperStatistics:
        return SweeperStatistics(self._claimed, self._batches, self._wakeups, self._armed_for)

    async def close(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._timer is not None:
            self._timer.cancel()
        tasks = {t for t in (self._task, self._watcher) if t is not None}
        self._task = self._watcher = None
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        done, stuck = await asyncio.wait(tasks, timeout=STOP_WITHIN)
        for task in stuck:
            # A store call that does not answer (a database gone quiet): not waited for.
            stack = io.StringIO()
            task.print_stack(file=stack)
            log.warning("the sweeper did not stop within %s s:\n%s", STOP_WITHIN, stack.getvalue())
        for task in done:
            if not task.cancelled():
                task.exception()

    async def _loop(self) -> None:
        assert self._event is not None
        event = self._event
        while True:
            event.clear()
            now = self._clock.now()
            limit = self._batch if self._room is None else min(self._batch, self._room())
            if limit <= 0:
                await event.wait()  # (the engine wakes it when it lets go of a run)
                continue
            try:
                if self._before is not None:
                    await self._before()
                    now = self._clock.now()
                nxt = await self._store.next_wake()
                # (A store with a clock of its own says what is due by that clock: asked at
                # every wake, whatever this machine's clock says.)
                if nxt is not None and (nxt <= now or self._store.own_clock):
                    leases = await self._store.claim_runs(self._owner, now, now + self._ttl, limit)
                    if leases:
                        self._claimed += len(leases)
                        self._batches += 1
                        judged = self._judged(leases, now)
                        # (How long after the earliest wake instant they are claimed.)
                        self._instruments.late(seconds(nxt, judged))
                        if await self._take(leases, judged) and nxt <= now:
                            await asyncio.sleep(0)
                            continue
                    if nxt <= now:
                        # Nothing to do now: the runs due are held by other live workers, or
                        # what is due of this engine's own is being fired already.
                        nxt = now + RECHECK
            except StoreUnusableError as exc:
                self._stop(exc)
                return
            except StoreError as exc:
                # The store is down or busy: nothing is lost (wake instants are in it); look
                # again a little later.
                log.log(_level(exc), "sweeper: %s; looking again in %s", exc, RECHECK)
                nxt = now + RECHECK
            if nxt is not None:
                self._arm(nxt, event)
            await self._idle(event)
            self._wakeups += 1

    def _judged(self, leases: Sequence[Lease], now: datetime) -> datetime:
        """The instant by which the claimed runs' due entries are fired: the store's clock
        where it has its own (a claim's leases run for the term asked from it), else ``now``."""
        if self._store.own_clock:
            return leases[0].expires - self._ttl
        return now

    async def _idle(self, event: asyncio.Event) -> None:
        """Wait for the armed instant or a nearer wake (or, on a shared store, another
        process's notice, or ``poll`` seconds: see :meth:`_notices`)."""
        await event.wait()

    async def _notices(self, event: asyncio.Event) -> None:
        """On a shared store: wake the sweeper on each notice from another process, and at
        least every ``poll`` seconds (a lost notice only delays)."""
        while True:
            try:
                await self._store.wait_changed(self._poll, wakes_only=True)
            except StoreUnusableError as exc:
                self._stop(exc)
                if self._task is not None:
                    self._task.cancel()
                return
            except StoreError as exc:
                log.log(_level(exc), "sweeper: %s; looking again in %s s", exc, self._poll)
                await self._clock.sleep(timedelta(seconds=self._poll))
            event.set()

    def _arm(self, when: datetime, event: asyncio.Event) -> None:
        if self._timer is not None:
            if self._armed_for == when:
                return
            self._timer.cancel()
        self._armed_for = when

        def ring(*_: Any) -> None:
            self._armed_for = None
            self._timer = None
            event.set()

        self._timer = self._clock.call_at(when, ring)


def _level(error: StoreError) -> int:
    """How loud a failed look for work is: a store that does not answer says so itself, once
    when it stops and once when it answers again (:class:`StoreDown`)."""
    return logging.DEBUG if isinstance(error, StoreDown) else logging.WARNING
