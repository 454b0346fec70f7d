"""Waiting for the answers to the requests an engine recorded in the store (its signals and
cancels to runs another worker holds): one watcher per engine looks at the store once for each
change, for every request the engine waits on, and tells the waiting requests whose answer may
have come.

Without it each waiting request watched the store itself and read its request and its run on
every change: with 200 requests waiting on a server, every commit of its worker cost 400 reads,
and those reads took most of the server's time, the worker's own work waiting behind them.
Here a change costs one read per run waited on (its unanswered requests); a waiting request
reads its answer once the watcher no longer finds it unanswered. (A worker's requests still look
at every change, each for itself: a worker takes the run once its holder lets it go.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Protocol

from flowtide.clock import Clock
from flowtide.store.base import Store, StoreError

__all__ = ["AnswerWatch", "AnswerWatchHost"]

log = logging.getLogger("flowtide.engine")


class AnswerWatchHost(Protocol):
    """What an :class:`AnswerWatch` reads of its engine."""

    store: Store
    clock: Clock
    poll: float
    executes: bool


class AnswerWatch:
    """The requests an engine waits on, by run, and the one task that watches them."""

    def __init__(self, host: AnswerWatchHost) -> None:
        self._host = host
        self._waiting: dict[str, dict[str, asyncio.Event]] = {}
        """Run id -> request id -> set when the request may have been answered."""
        self._task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def watching(self, run_id: str, request_id: str) -> Iterator[asyncio.Event]:
        """While in the block: an event set whenever the request is no longer among its run's
        unanswered ones (answered, or the run has ended), or the watch could not look (the
        store failed). Whoever waits clears it, then reads the answer."""
        event = asyncio.Event()
        self._waiting.setdefault(run_id, {})[request_id] = event
        self.ensure()
        try:
            yield event
        finally:
            requests = self._waiting.get(run_id)
            if requests is not None:
                requests.pop(request_id, None)
                if not requests:
                    del self._waiting[run_id]
            if not self._waiting and self._task is not None:
                # Nothing left to watch: stop now rather than at the next change (a loop that
                # closes meanwhile must find nothing of it pending).
                self._task.cancel()
                self._task = None

    def ensure(self) -> None:
        """Start the watching task if requests wait and none runs."""
        if self._waiting and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        try:
            while self._waiting:
                await self._round()
        finally:
            # (Stopped, or failed: each waiting request looks for itself, and starts a new
            # watch if it waits on.)
            self._tell_all()

    async def _round(self) -> None:
        """Look at every run waited on, then wait for the next change (or ``poll`` seconds).
        The wait starts before the look: a change made while looking brings another look."""
        store, poll = self._host.store, self._host.poll
        changed = asyncio.ensure_future(store.wait_changed(poll))
        try:
            await self._look(store)
            await changed
        except StoreError as exc:
            log.warning("waiting for answers: %s; looking again in %s s", exc, poll)
            self._tell_all()
            await self._host.clock.sleep(timedelta(seconds=poll))
        finally:
            if not changed.done():
                changed.cancel()
            elif not changed.cancelled():
                changed.exception()  # (retrieved: told above if it failed)

    async def _look(self, store: Store) -> None:
        if self._host.executes:
            # A worker waiting for an answer takes the run itself once its holder lets it go:
            # any change may be that, so each of its requests looks at every change.
            self._tell_all()
            return
        for run_id, requests in list(self._waiting.items()):
            # Only the requests waiting before the read: one recorded while it is under way may
            # be missing from what it found, unanswered all the same.
            before = list(requests.items())
            unanswered = {r.id for r in await store.pending_requests(run_id)}
            for request_id, event in before:
                if request_id not in unanswered:
                    event.set()

    def _tell_all(self) -> None:
        for requests in self._waiting.values():
            for event in requests.values():
                event.set()
