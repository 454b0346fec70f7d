"""The due-instant scheduler: one task per engine that fires what the store says is due.

It asks the store for the earliest due instant, sleeps until then through the clock (one timer,
re-armed when a nearer instant is written: :meth:`Scheduler.wake`), then claims due entries in
batches and hands each to its run. Its cost per firing does not depend on how many tokens wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from flowtide.clock import Clock, TimerHandle
from flowtide.store.base import DueEntry, Store

BATCH = 100


class Scheduler:
    def __init__(self, store: Store, clock: Clock, fire: Callable[[DueEntry], None]) -> None:
        self._store = store
        self._clock = clock
        self._fire = fire
        self._task: asyncio.Task[None] | None = None
        self._event: asyncio.Event | None = None
        self._timer: TimerHandle | None = None
        self._armed_for: datetime | None = None

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
                due = await self._store.claim_due(now, BATCH)
                for entry in due:
                    self._fire(entry)
                await asyncio.sleep(0)
                continue
            if nxt is not None:
                self._arm(nxt, event)
            await event.wait()

    def _arm(self, when: datetime, event: asyncio.Event) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = when

        def ring(*_: Any) -> None:
            self._armed_for = None
            event.set()

        self._timer = self._clock.call_at(when, ring)
