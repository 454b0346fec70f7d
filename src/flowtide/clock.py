"""Clocks: the one source of time for every timing decision the engine makes.

The engine never reads the wall clock or sleeps on its own: node timeouts, run deadlines, retry
backoffs, waits, throttles and idle batches all go through a :class:`Clock`. Production code uses
:class:`SystemClock`; tests use :class:`VirtualClock`, whose time moves only when the test says so
(:meth:`VirtualClock.advance`) or, in autojump mode, whenever the event loop has settled.

All instants are timezone-aware UTC :class:`~datetime.datetime` values.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

__all__ = [
    "Clock",
    "OffsetClock",
    "SystemClock",
    "TimerHandle",
    "VirtualClock",
    "isoformat",
    "utc",
]


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC instant (naive values are refused)."""
    if value.tzinfo is None:
        raise ValueError(f"instant {value!r} has no time zone")
    return value.astimezone(UTC)


def isoformat(when: datetime) -> str:
    """``when.isoformat()``, faster for the UTC instants the engine formats on every step (a
    run's start and park write four): the text up to the minute is formatted once per minute,
    and only the seconds and microseconds for each instant."""
    if when.tzinfo is not UTC or type(when) is not datetime:
        return when.isoformat()
    key = (when.minute, when.hour, when.day, when.month, when.year)
    prefix = _MINUTES.get(key)
    if prefix is None:
        if len(_MINUTES) >= _MINUTES_KEPT:
            _MINUTES.clear()
        prefix = _MINUTES[key] = when.isoformat()[:17]  # "YYYY-MM-DDTHH:MM:"
    us = when.microsecond
    if us:
        # As isoformat: six digits of microseconds, none at all when there are none.
        return prefix + _SECONDS[when.second] + "." + str(us + 1_000_000)[1:] + "+00:00"
    return prefix + _SECONDS[when.second] + "+00:00"


_MINUTES: dict[tuple[int, int, int, int, int], str] = {}
"""(minute, hour, day, month, year) -> the isoformat text up to the minute (a run's start and
its deadlines fall in a few minutes at a time; cleared when it fills up)."""
_MINUTES_KEPT = 1024
_SECONDS = tuple(f"{i:02d}" for i in range(60))


class TimerHandle(ABC):
    """A callback scheduled at an instant; :meth:`cancel` drops it if it has not run yet."""

    @abstractmethod
    def cancel(self) -> None: ...

    @property
    @abstractmethod
    def when(self) -> datetime: ...


class Clock(ABC):
    """What the engine needs from time.

    ``now()`` is aware UTC. ``call_at(instant, callback)`` runs ``callback`` (a plain function, on
    the event loop) at ``instant`` or as soon as possible after it. ``hold()`` marks real work in
    progress outside the loop (a worker thread, a subprocess): a virtual clock in autojump mode
    does not jump while something is held.
    """

    ties_in_order: bool = False
    """Whether callbacks due at the same instant run in the order they were armed. The system
    clock makes no such promise (the loop's timers at one instant run in no set order), so there
    it does not matter which of two timers for one instant was armed first."""

    @abstractmethod
    def now(self) -> datetime: ...

    @abstractmethod
    def call_at(self, when: datetime, callback: Callable[[], None]) -> TimerHandle: ...

    async def sleep_until(self, when: datetime) -> None:
        """Return at ``when`` (at once, after one loop turn, if it has passed)."""
        if when <= self.now():
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.call_at(when, wake)
        try:
            await fut
        finally:
            handle.cancel()

    async def sleep(self, delay: timedelta) -> None:
        await self.sleep_until(self.now() + delay)

    def hold(self) -> contextlib.AbstractContextManager[None]:
        """Real work outside the event loop is in progress (a no-op on the system clock)."""
        return _NOTHING  # (one shared no-op: entered on every threaded step)

    def busy(self) -> contextlib.AbstractContextManager[None]:
        """A store's round trip is in progress: short work outside the loop that always ends
        (a no-op on the system clock). Unlike :meth:`hold`, a virtual clock waits for it before
        any timer fires, when it advances too."""
        return _NOTHING


_NOTHING = contextlib.nullcontext()


class _LoopTimer(TimerHandle):
    __slots__ = ("_handle", "_when")

    def __init__(self, when: datetime, handle: asyncio.TimerHandle) -> None:
        self._when = when
        self._handle = handle

    def cancel(self) -> None:
        self._handle.cancel()

    @property
    def when(self) -> datetime:
        return self._when


class SystemClock(Clock):
    """Real time: ``datetime.now(UTC)``, timers on the running event loop."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: datetime, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        delay = max(0.0, (when - self.now()).total_seconds())
        return _LoopTimer(when, loop.call_at(loop.time() + delay, callback))


class _ShiftedTimer(TimerHandle):
    __slots__ = ("_handle", "_when")

    def __init__(self, when: datetime, handle: TimerHandle) -> None:
        self._when = when
        self._handle = handle

    def cancel(self) -> None:
        self._handle.cancel()

    @property
    def when(self) -> datetime:
        return self._when


class OffsetClock(Clock):
    """Another clock's time plus ``offset``: ``now()`` is ``inner.now() + offset``, and a
    callback armed for an instant runs when ``inner`` reaches that instant minus ``offset``.

    The engine keeps time by its store's clock this way, where the store has one: ``offset`` is
    how far that clock is ahead of this machine's (measured again from time to time, so it may
    change; a timer armed before a change keeps the instant it was armed for on ``inner``)."""

    def __init__(self, inner: Clock, offset: timedelta = timedelta(0)) -> None:
        self.inner = inner
        self.offset = offset
        self.ties_in_order = inner.ties_in_order

    def now(self) -> datetime:
        return self.inner.now() + self.offset

    def call_at(self, when: datetime, callback: Callable[[], None]) -> TimerHandle:
        return _ShiftedTimer(when, self.inner.call_at(when - self.offset, callback))

    def hold(self) -> contextlib.AbstractContextManager[None]:
        return self.inner.hold()

    def busy(self) -> contextlib.AbstractContextManager[None]:
        return self.inner.busy()


class _VirtualTimer(TimerHandle):
    __slots__ = ("_on_cancel", "_when", "callback", "cancelled")

    def __init__(
        self, when: datetime, callback: Callable[[], None], on_cancel: Callable[[], None]
    ) -> None:
        self._when = when
        self.callback: Callable[[], None] | None = callback
        self.cancelled = False
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        if not self.cancelled:
            self._on_cancel()
        self.cancelled = True
        self.callback = None

    @property
    def when(self) -> datetime:
        return self._when


DEFAULT_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

QUIET_PASSES = 20
"""Loop passes in a row without any call on the clock after which a virtual clock takes the
loop for settled. The engine reads the time at nearly every step it records; its longest
stretch without touching the clock is a handful of passes (a store call, a task hand-off)."""

SETTLE_LIMIT = 100_000
"""Loop passes after which :meth:`VirtualClock.settle` gives up waiting for quiet (code that
calls on the clock on every pass, forever, would otherwise hold it up for good)."""


class VirtualClock(Clock):
    """Time that moves only when told to.

    ``await clock.advance(timedelta(minutes=10))`` runs every callback due within the next ten
    minutes in instant order (ties in scheduling order), letting the event loop settle after each
    one, then sets the time to the end of the window. With ``autojump=True`` a background task
    jumps straight to the next timer whenever the loop has settled and nothing is held (see
    :meth:`Clock.hold`), so a run with a ten-minute wait finishes in milliseconds.

    **When the loop has settled.** The clock cannot look into the event loop's queue, so it
    judges by what it sees itself: every call on it is activity (reading the time, arming or
    cancelling a timer, a timer firing, taking or releasing a hold). The loop has settled when
    ``quiet_passes`` loop passes in a row went by without any activity, and, for autojump and
    :meth:`run_until_idle`, nothing is held. Code that works for longer than that without
    calling on the clock (a node in a worker thread, a busy loop of bare yields) must say so
    with :meth:`Clock.hold`, or autojump may move time under it.

    Timers live in a heap with lazy deletion: cancelling is O(1), stale entries are skipped.
    """

    ties_in_order = True

    def __init__(
        self,
        start: datetime | None = None,
        *,
        autojump: bool = False,
        quiet_passes: int = QUIET_PASSES,
    ) -> None:
        if quiet_passes < 1:
            raise ValueError("a virtual clock needs at least one quiet loop pass to settle")
        self._now = utc(start) if start is not None else DEFAULT_EPOCH
        self._quiet_passes = quiet_passes
        self._activity = 0
        self._heap: list[tuple[datetime, int, _VirtualTimer]] = []
        self._seq = itertools.count()
        self._holds = 0
        self._busy = 0
        self._autojump = autojump
        self._jumper: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None

    # -- Clock ---------------------------------------------------------------------------------

    def now(self) -> datetime:
        self._activity += 1
        return self._now

    def call_at(self, when: datetime, callback: Callable[[], None]) -> TimerHandle:
        timer = _VirtualTimer(when, callback, self._note_activity)
        heapq.heappush(self._heap, (when, next(self._seq), timer))
        self._activity += 1
        self._poke()
        return timer

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        self._holds += 1
        self._activity += 1
        try:
            yield
        finally:
            self._holds -= 1
            self._activity += 1
            self._poke()

    # -- driving time ------------

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        self._busy += 1
        self._activity += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._activity += 1
            self._poke()

    @property
    def held(self) -> bool:
        return self._holds > 0

    def next_timer(self) -> datetime | None:
        """The instant of the earliest pending timer, if any."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    async def advance(self, delta: timedelta) -> None:
        """Move time forward by ``delta``, firing what falls due on the way."""
        if delta < timedelta(0):
            raise ValueError("a virtual clock cannot go back in time")
        await self.advance_to(self._now + delta)

    async def advance_to(self, target: datetime) -> None:
        target = utc(target)
        await self.settle()
        while True:
            timer = self._pop_due(target)
            if timer is None:
                break
            self._fire(timer)
            await self.settle()
        if target > self._now:
            self._now = target
        await self.settle()

    async def run_until_idle(self, limit: int = 100_000) -> None:
        """Jump from timer to timer until none is left (waits for held work in between)."""
        for _ in range(limit):
            await self.settle(wait_held=True)
            timer = self._pop_due(None)
            if timer is None:
                return
            self._fire(timer)
        raise RuntimeError("virtual clock: timers keep being scheduled")

    async def settle(self, *, wait_held: bool = False) -> None:
        """Let the event loop run until it has settled: ``quiet_passes`` loop passes in a row
        without any call on this clock (and, with ``wait_held``, nothing held: held work is
        waited for, however long it takes). Gives up after :data:`SETTLE_LIMIT` passes."""
        seen = self._activity
        quiet = 0
        for _ in range(SETTLE_LIMIT):
            await asyncio.sleep(0)
            if self._busy or (wait_held and self._holds):
                await self._wait_change()
                seen, quiet = self._activity, 0
            elif self._activity != seen:
                seen, quiet = self._activity, 0
            else:
                quiet += 1
                if quiet >= self._quiet_passes:
                    return

    def start_autojump(self) -> None:
        """Start jumping (idempotent); called by the engine when the clock is in autojump mode."""
        if not self._autojump or (self._jumper is not None and not self._jumper.done()):
            return
        self._jumper = asyncio.get_running_loop().create_task(self._jump_loop())

    async def aclose(self) -> None:
        if self._jumper is not None:
            self._jumper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._jumper
            self._jumper = None

    # -- internals ------------

    def _note_activity(self) -> None:
        self._activity += 1

    def _poke(self) -> None:
        if self._changed is not None:
            self._changed.set()
        if self._autojump and self._jumper is None:
            with contextlib.suppress(RuntimeError):
                self.start_autojump()

    async def _wait_change(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.clear()
        await self._changed.wait()

    def _prune(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)

    def _pop_due(self, target: datetime | None) -> _VirtualTimer | None:
        self._prune()
        if not self._heap:
            return None
        when, _, timer = self._heap[0]
        if target is not None and when > target:
            return None
        heapq.heappop(self._heap)
        return timer

    def _fire(self, timer: _VirtualTimer) -> None:
        if timer.when > self._now:
            self._now = timer.when
        callback, timer.callback = timer.callback, None
        timer.cancelled = True
        self._activity += 1
        if callback is not None:
            callback()

    async def _jump_loop(self) -> None:
        while True:
            await self.settle(wait_held=True)
            if self._holds or self._busy:
                continue
            timer = self._pop_due(None)
            if timer is None:
                await self._wait_change()
                continue
            self._fire(timer)
