"""The engine's time: its clock, kept to its store's where the store has one.

Machines never quite agree on the time, and one of them may be a minute off. On a store with a
clock of its own (:attr:`Store.own_clock`: PostgreSQL's, one for every worker), the engine
measures how far that clock is ahead of its own (:meth:`Store.clock_offset`) before it first
needs the time, and again every :data:`MEASURE_EVERY` while it works, and keeps time by it:
every instant it computes (a park's deadline, a retry's backoff, a timer, a node's anchor, a
run's deadline, when the sweeper looks again) is its own clock's plus that offset
(:class:`~flowtide.clock.OffsetClock`), so a worker whose clock is wrong still arms a timeout
of one minute for one minute of the database's time.

A reading is the store's clock read between two readings of the engine's, taken at their
middle: it is off by at most half its round trip. The reading with the shortest round trip is
kept, until one disagrees with it by more than both their errors (a clock was set), or it is
older than :data:`KEEP_FOR` (clocks drift). A difference within the kept reading's error is
taken for none: engine and store on one machine are never offset.

A virtual clock (tests, ``flowtide simulate``) is never offset: an engine on one tells its
store that instants are judged by the engine's clock (``own_clock`` set to False), and a store
without a clock of its own (memory, SQLite: one machine) is never off.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from flowtide.clock import Clock, OffsetClock, SystemClock, VirtualClock
from flowtide.store.base import ClockReading, Store, StoreError

__all__ = ["FIRST_READINGS", "KEEP_FOR", "MEASURE_EVERY", "TELL_OVER", "Timekeeper", "offset_of"]

log = logging.getLogger("flowtide.engine")

FIRST_READINGS = 3
"""Readings taken one after another the first time (the shortest round trip is kept)."""

MEASURE_EVERY = timedelta(seconds=15)
"""How often, at most, the offset is measured again (once more each time the engine needs the
time after that: at the sweeper's next look for work, or a client's next call)."""

KEEP_FOR = timedelta(minutes=5)
"""How long a reading with a short round trip is preferred to later ones (clocks drift)."""

TELL_OVER = timedelta(seconds=1)
"""An offset this large or larger is logged (once, and again if it changes by as much)."""


class Timekeeper:
    """The clock of an engine on ``store``: ``clock`` (the system clock by default), plus the
    store's measured offset where the store has a clock of its own (see the module)."""

    def __init__(self, store: Store, clock: Clock | None) -> None:
        inner = clock if clock is not None else SystemClock()
        # Virtual time must not move while the database works.
        store.busy = inner.busy
        if isinstance(inner, VirtualClock):
            # Nor can the database's clock judge instants on virtual time: the engine's do.
            store.own_clock = False
        self._store = store
        self._inner = inner
        self._offset = OffsetClock(inner) if store.own_clock else None
        self.clock: Clock = self._offset if self._offset is not None else inner
        """The engine's clock."""
        self._kept: ClockReading | None = None
        self._kept_at: datetime | None = None  # (on the inner clock)
        self._measured_at: datetime | None = None
        self._measuring = asyncio.Lock()
        self._told = timedelta(0)

    @property
    def offset(self) -> timedelta:
        """How far the engine's clock is set ahead of the clock it was given."""
        return self._offset.offset if self._offset is not None else timedelta(0)

    async def ready(self) -> None:
        """Called before the engine makes timing decisions: a virtual clock in autojump mode
        starts jumping; the store's offset is measured the first time (a store that cannot
        answer raises its :class:`StoreError`) and again once :data:`MEASURE_EVERY` has
        passed (a failure then keeps the offset measured last)."""
        if isinstance(self._inner, VirtualClock):
            self._inner.start_autojump()
        if self._offset is None:
            return
        if self._measured_at is None:
            async with self._measuring:
                if self._measured_at is None:
                    await self.measure()
                    for _ in range(FIRST_READINGS - 1):
                        await self._measure_again()
            return
        since = self._inner.now() - self._measured_at
        if timedelta(0) <= since < MEASURE_EVERY or self._measuring.locked():
            return
        async with self._measuring:
            await self._measure_again()

    async def _measure_again(self) -> None:
        """:meth:`measure`, keeping the offset measured last if the store cannot answer (its
        next use says so, if that lasts)."""
        try:
            await self.measure()
        except StoreError as exc:
            log.debug("cannot read the store's clock: %s", exc)

    async def measure(self) -> timedelta:
        """Read the store's clock once, keep the reading if it is better (see the module), and
        set the engine's clock by the one kept; the offset now."""
        if self._offset is None:
            return timedelta(0)
        reading = await self._store.clock_offset(self._inner.now)
        now = self._measured_at = self._inner.now()
        kept, kept_at = self._kept, self._kept_at
        if kept is None or kept_at is None or _better(reading, kept, now - kept_at):
            self._kept, self._kept_at = reading, now
            self._offset.offset = offset_of(reading)
            self._tell(self._offset.offset)
        return self._offset.offset

    def _tell(self, offset: timedelta) -> None:
        """Log an offset of :data:`TELL_OVER` or more once, and again when it changes by as
        much (or comes back under)."""
        if abs(offset - self._told) < TELL_OVER:
            return
        self._told = offset
        if abs(offset) < TELL_OVER:
            log.info("this machine's clock agrees with the store's again (%r)", self._store)
            return
        seconds = abs(offset.total_seconds())
        way = "behind" if offset > timedelta(0) else "ahead of"
        log.warning(
            "this machine's clock is %.1f s %s the store's (%r): Flowtide keeps time by the "
            "store's clock; set this machine's clock right (NTP)",
            seconds,
            way,
            self._store,
        )


def offset_of(reading: ClockReading) -> timedelta:
    """The offset a reading gives: none if it is within the reading's error."""
    if abs(reading.ahead) <= reading.round_trip / 2:
        return timedelta(0)
    return reading.ahead


def _better(new: ClockReading, kept: ClockReading, age: timedelta) -> bool:
    """Whether ``new`` replaces ``kept`` (taken ``age`` ago): a shorter round trip, an old or
    future reading, or one that cannot both be right (the true offset lies within half the
    round trip of each)."""
    if new.round_trip <= kept.round_trip or not timedelta(0) <= age < KEEP_FOR:
        return True
    return abs(new.ahead - kept.ahead) > (new.round_trip + kept.round_trip) / 2
