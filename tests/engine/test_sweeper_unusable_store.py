"""A store that cannot be used as it is (damaged, read-only, its file replaced) stops the
sweeper, which says so once and answers ``broken()``; a store down for a while does not."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from flowtide.store import MemoryStore, StoreError, StoreUnusableError
from tests.engine.engine_helpers import running


class FailingStore(MemoryStore):
    """A memory store whose ``next_wake`` raises ``error`` (counting the calls)."""

    def __init__(self, error: StoreError) -> None:
        super().__init__()
        self.error = error
        self.calls = 0

    async def next_wake(self) -> datetime | None:
        self.calls += 1
        raise self.error


async def test_an_unusable_store_stops_the_sweeper_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FailingStore(StoreUnusableError("the store at runs.db is damaged: malformed"))
    async with running(store=store) as (engine, clock):
        with caplog.at_level(logging.INFO, logger="flowtide.sweeper"):
            engine.sweeper.wake()
            broken = await engine.sweeper.broken()
            await clock.advance(timedelta(seconds=60))
        assert str(broken) == "the store at runs.db is damaged: malformed"
        assert store.calls == 1  # (never asked again)
    said = [r for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO  # (its watcher tells the user)


async def test_unwatched_the_stop_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    store = FailingStore(StoreUnusableError("the store at runs.db is read-only"))
    async with running(store=store) as (engine, clock):
        with caplog.at_level(logging.INFO, logger="flowtide.sweeper"):
            engine.sweeper.wake()
            await clock.advance(timedelta(seconds=60))
    said = [r for r in caplog.records if "read-only" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.ERROR]
    assert store.calls == 1


async def test_a_store_down_for_a_while_is_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    store = FailingStore(StoreError("the server cannot be reached"))
    async with running(store=store) as (engine, clock):
        with caplog.at_level(logging.WARNING, logger="flowtide.sweeper"):
            engine.sweeper.wake()
            await clock.advance(timedelta(seconds=10))
    assert store.calls > 5


class UnheardStore(MemoryStore):
    """A store other processes write to, whose notices cannot be waited for (counting the
    tries)."""

    shared = True

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        self.waits += 1
        raise StoreError("the server cannot be reached")


async def test_notices_that_cannot_be_waited_for_are_tried_again_on_the_engines_clock() -> None:
    store = UnheardStore()
    async with running(autojump=False, store=store, poll=60.0) as (engine, clock):
        engine.sweeper.wake()
        await clock.settle()
        assert store.waits == 1
        await clock.advance(timedelta(seconds=59))
        assert store.waits == 1  # (not before the poll has passed)
        await clock.advance(timedelta(seconds=1))
        assert store.waits == 2
        await clock.advance(timedelta(seconds=60))
        assert store.waits == 3
