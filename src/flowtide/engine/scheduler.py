"""The sweeper: one task per engine that fires what the store says is due.

Due instants are rows in the store (retry backoffs, waits, park deadlines, escalation timers, run
deadlines of runs nobody holds in memory), indexed by instant. The sweeper asks the store for the
earliest one, sleeps until then through the clock (one timer, re-armed only when a nearer instant
is written: :meth:`Sweeper.wake`), then claims due entries in batches (``claim_due`` removes
them, earliest first) and hands each batch to the engine, which fires every entry through the
same compare-and-set path as signals. The cost of a firing does not depend on how many tokens
wait: a heap (or a database index) gives the earliest entry, and stale entries are skipped lazily.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowtide.clock import Clock, TimerHandle
from flowtide.store.base import DueEntry, Store

__all__ = ["BATCH", "Sweeper", "SweeperStatistics"]

BATCH = 500


@dataclass(frozen=True, slots=True)
class SweeperStatistics:
    """An immutable snapshot of the sweeper's counters."""

    fired: int
    batches: int
    wakeups: int
    armed_for: datetime | None


class Sweeper:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        fire: Callable[[Sequence[DueEntry]], Awaitable[None]],
        *,
        batch: int = BATCH,
    ) -> None:
        self._store = store
        self._clock = clock
        self._fire = fire
        self._batch = batch
        self._task: asyncio.Task[None] | None = None
        self._event: asyncio.Event | None = None
        self._timer: TimerHandle | None = None
        self._armed_for: datetime | None = None
        self._fired = 0
        self._batches = 0
        self._wakeups = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._event = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def wake(self, when: datetime | None = None) -> None:
        """A due instant was written (at ``when``): look again if nearer than the armed one."""
        if self._event is None:
            return
        if when is None or self._armed_for is None or when < self._armed_for:
            self._event.set()

    def statistics(self) -> SweeperStatistics:
        return SweeperStatistics(self._fired, self._batches, self._wakeups, self._armed_for)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        assert self._event is not None
        event = self._event
        while True:
            event.clear()
            now = self._clock.now()
            nxt = await self._store.next_due()
            if nxt is not None and nxt <= now:
                due = await self._store.claim_due(now, self._batch)
                if due:
                    self._fired += len(due)
                    self._batches += 1
                    await self._fire(due)
                await asyncio.sleep(0)
                continue
            if nxt is not None:
                self._arm(nxt, event)
            await event.wait()
            self._wakeups += 1

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
