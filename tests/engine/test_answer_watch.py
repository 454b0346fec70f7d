"""The watch of a run's unanswered requests, without an engine: a request that starts waiting
while the watch reads is not told it may be answered by a read that could not see it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from flowtide.clock import Clock, VirtualClock
from flowtide.engine.requests.answers import AnswerWatch
from flowtide.store import StoreError


class Host:
    """A store whose unanswered requests of a run are read slowly: the read finds what was
    unanswered when it began."""

    poll = 60.0
    executes = False

    def __init__(self) -> None:
        self.store: Any = self
        self.virtual = VirtualClock()
        self.clock: Clock = self.virtual
        self.unanswered: set[str] = set()
        self.reading = asyncio.Event()
        self.finish = asyncio.Event()

    async def pending_requests(self, run_id: str) -> Sequence[Any]:
        found = [SimpleNamespace(id=i) for i in sorted(self.unanswered)]
        self.reading.set()
        await self.finish.wait()
        return found

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        await asyncio.sleep(seconds)
        return False


async def test_a_request_recorded_while_the_watch_reads_is_not_told_by_that_read() -> None:
    host = Host()
    watch = AnswerWatch(host)
    host.unanswered.add("first")
    with watch.watching("run", "first") as first:
        await asyncio.wait_for(host.reading.wait(), 1)
        host.unanswered.add("second")  # (recorded after the read began)
        with watch.watching("run", "second") as second:
            host.finish.set()
            for _ in range(5):
                await asyncio.sleep(0)
            assert not first.is_set()  # (unanswered when read)
            assert not second.is_set()  # (not seen by that read: not a sign of its answer)
            host.unanswered.discard("first")


async def test_a_request_no_longer_unanswered_is_told() -> None:
    host = Host()
    watch = AnswerWatch(host)
    with watch.watching("run", "answered") as answered:
        host.finish.set()
        await asyncio.wait_for(answered.wait(), 1)


class DownHost(Host):
    """A store whose unanswered requests cannot be read (counting the tries)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def pending_requests(self, run_id: str) -> Sequence[Any]:
        self.reads += 1
        raise StoreError("the server cannot be reached")


async def test_a_store_that_cannot_be_read_is_read_again_after_the_poll_on_the_clock() -> None:
    host = DownHost()
    watch = AnswerWatch(host)
    with watch.watching("run", "request") as told:
        await host.virtual.settle()
        assert host.reads == 1 and told.is_set()  # (told: it looks for itself)
        await host.virtual.advance(timedelta(seconds=59))
        assert host.reads == 1
        await host.virtual.advance(timedelta(seconds=1))
        assert host.reads == 2
