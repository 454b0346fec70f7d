"""Delivering committed events to the engine's hooks, outside the steps that made them.

A step publishes its events once they are committed and goes on at once; one delivery task per
engine hands them to every hook, in commit order. A slow hook delays only the hooks (and the
callers that wait for the hooks to catch up, see :meth:`HookDelivery.caught_up`), never a run's
steps or other runs. A hook that raises is reported to ``on_failure`` (the engine records a
``hook_failed`` event, which is not delivered to hooks again) and delivery goes on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import HookFailed
from flowtide.engine.events import Hook
from flowtide.engine.redaction import Redact, bound_message, redacted
from flowtide.store.base import EventRecord

FailureReport = Callable[[Hook, EventRecord, Exception], Awaitable[None]]


class HookDelivery:
    def __init__(self, hooks: list[Hook], on_failure: FailureReport) -> None:
        self._hooks = hooks
        self._on_failure = on_failure
        self._queue: deque[EventRecord] = deque()
        self._published = 0
        self._delivered = 0
        self._progress = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def publish(self, events: Sequence[EventRecord]) -> None:
        """Queue committed events for the hooks (nothing happens if there is no hook)."""
        if not self._hooks or not events:
            return
        self._queue.extend(events)
        self._published += len(events)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._deliver())

    async def caught_up(self) -> None:
        """Return once every event published before this call has been delivered."""
        target = self._published
        while self._delivered < target and self._task is not None and not self._task.done():
            self._progress.clear()
            await self._progress.wait()

    async def close(self) -> None:
        """Deliver what is queued, then stop."""
        await self.caught_up()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _deliver(self) -> None:
        while self._queue:
            event = self._queue.popleft()
            for hook in list(self._hooks):
                try:
                    out = hook(event)
                    if inspect.isawaitable(out):
                        await out
                except Exception as exc:
                    await self._on_failure(hook, event, exc)
            self._delivered += 1
            self._progress.set()


def hook_failure(
    hook: Hook, event: EventRecord, exc: Exception, at: datetime, redact: Redact | None
) -> EventRecord:
    """The ``hook_failed`` event a hook's failure on ``event`` is recorded as (its message
    redacted and bounded as every error a run records)."""
    return event_record(
        HookFailed(
            hook=getattr(hook, "__qualname__", repr(hook)),
            event=event.kind,
            error=f"{type(exc).__name__}: {bound_message(redacted(str(exc), redact))}",
        ),
        event.run_id,
        at,
        placement=event.placement,
        attempt=event.attempt,
        token_id=event.token_id,
    )
