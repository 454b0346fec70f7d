"""The engine keeps time by its store's clock where the store has one: the offset it measures
(which reading it keeps, when it measures again, what it says), and the instants an engine
computes on a store whose clock is an hour ahead of its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import Clock, OffsetClock, SystemClock, TimerHandle, VirtualClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.engine.timing.timekeeping import (
    FIRST_READINGS,
    KEEP_FOR,
    MEASURE_EVERY,
    Timekeeper,
    offset_of,
)
from flowtide.store import MemoryStore, StoreDown
from flowtide.store.base import ClockReading

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def reading(ahead: float, round_trip: float) -> ClockReading:
    return ClockReading(s(ahead), s(round_trip))


class ScriptedStore(MemoryStore):
    """A store with a clock of its own whose readings are given (the last one repeats)."""

    own_clock = True

    def __init__(self, *readings: ClockReading | Exception) -> None:
        super().__init__()
        self.readings = list(readings)
        self.asked = 0

    async def clock_offset(self, now: Callable[[], datetime]) -> ClockReading:
        self.asked += 1
        now()
        got = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        if isinstance(got, Exception):
            raise got
        return got


class HandClock(Clock):
    """A clock set by hand (no timers: the timekeeper arms none)."""

    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at

    def call_at(self, when: datetime, callback: Callable[[], None]) -> TimerHandle:
        raise AssertionError("no timer expected")


async def test_the_first_time_it_keeps_the_reading_with_the_shortest_round_trip() -> None:
    store = ScriptedStore(reading(60.2, 0.4), reading(60.05, 0.1), reading(60.3, 0.6))
    keeper = Timekeeper(store, HandClock())
    await keeper.ready()
    assert store.asked == FIRST_READINGS == 3
    assert keeper.offset == s(60.05)
    assert keeper.clock.now() == T0 + s(60.05)


async def test_it_measures_again_once_a_while_has_passed() -> None:
    clock = HandClock()
    store = ScriptedStore(reading(60, 0.1))
    keeper = Timekeeper(store, clock)
    await keeper.ready()
    await keeper.ready()
    assert store.asked == FIRST_READINGS
    clock.at += MEASURE_EVERY
    await keeper.ready()
    assert store.asked == FIRST_READINGS + 1
    clock.at -= timedelta(hours=1)  # (this machine's clock was set back: measured again)
    await keeper.ready()
    assert store.asked == FIRST_READINGS + 2


async def test_a_difference_within_the_error_of_its_reading_is_none() -> None:
    assert offset_of(reading(0.002, 0.005)) == timedelta(0)
    assert offset_of(reading(-0.002, 0.005)) == timedelta(0)
    assert offset_of(reading(0.004, 0.005)) == s(0.004)
    keeper = Timekeeper(ScriptedStore(reading(0.002, 0.005)), HandClock())
    await keeper.ready()
    assert keeper.offset == timedelta(0)


async def test_a_noisier_reading_that_agrees_does_not_replace_the_kept_one() -> None:
    keeper = Timekeeper(ScriptedStore(reading(60, 0.1), reading(60.2, 0.5)), HandClock())
    assert await keeper.measure() == s(60)
    assert await keeper.measure() == s(60)  # (|0.2| <= (0.1 + 0.5) / 2: both may be right)


async def test_a_reading_that_cannot_agree_replaces_it_a_clock_was_set() -> None:
    keeper = Timekeeper(ScriptedStore(reading(60, 0.1), reading(1, 0.5)), HandClock())
    await keeper.measure()
    assert await keeper.measure() == s(1)


async def test_an_old_reading_gives_way_to_a_new_one() -> None:
    clock = HandClock()
    keeper = Timekeeper(ScriptedStore(reading(60, 0.1), reading(60.3, 0.5)), clock)
    await keeper.measure()
    clock.at += KEEP_FOR
    assert await keeper.measure() == s(60.3)


async def test_a_store_that_cannot_answer_fails_the_first_measure_only() -> None:
    clock = HandClock()
    store = ScriptedStore(StoreDown("down"), reading(5, 0.1), StoreDown("down again"))
    keeper = Timekeeper(store, clock)
    with pytest.raises(StoreDown):
        await keeper.ready()
    await keeper.ready()
    assert keeper.offset == s(5)
    clock.at += MEASURE_EVERY
    await keeper.ready()  # (the offset measured last is kept)
    assert keeper.offset == s(5)


async def test_an_offset_of_a_second_or_more_is_told_once(caplog: pytest.LogCaptureFixture) -> None:
    store = ScriptedStore(reading(60, 0.1), reading(60.05, 0.1), reading(-30, 0.1), reading(0, 0.1))
    keeper = Timekeeper(store, HandClock())
    with caplog.at_level(logging.INFO, "flowtide.engine"):
        for _ in range(4):
            await keeper.measure()
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 3, told
    assert told[0].startswith("this machine's clock is 60.0 s behind the store's")
    assert told[1].startswith("this machine's clock is 30.0 s ahead of the store's")
    assert told[2].startswith("this machine's clock agrees with the store's again")


async def test_a_virtual_clock_is_never_offset() -> None:
    store = ScriptedStore(reading(60, 0.1))
    clock = VirtualClock(T0)
    keeper = Timekeeper(store, clock)
    await keeper.ready()
    assert keeper.clock is clock
    assert not store.own_clock  # (instants are judged on the virtual clock)
    assert store.asked == 0


async def test_a_store_without_a_clock_of_its_own_is_never_asked() -> None:
    store = MemoryStore()
    clock = SystemClock()
    keeper = Timekeeper(store, clock)
    await keeper.ready()
    assert keeper.clock is clock
    assert await keeper.measure() == timedelta(0)
    assert await store.clock_offset(clock.now) == ClockReading(timedelta(0), timedelta(0))


@node(id="test:timekeeping:ask", outputs=["answered"], timeout="P1D")
async def ask(ctx: NodeContext) -> Any:
    return Park(key=f"ask-{ctx.run_id}")


async def test_an_engine_computes_its_instants_on_the_stores_clock() -> None:
    hour = timedelta(hours=1)
    flow = (
        FlowBuilder("urn:test:timekeeping")
        .task("ask", ask, {"answered": "done"})
        .terminal("done", "done")
        .build()
    )
    store = ScriptedStore(reading(3600, 0))  # (the store's clock is an hour ahead)
    engine = Engine(store=store, clock=SystemClock(), flows=[flow], poll=0.05)
    try:
        assert isinstance(engine.clock, OffsetClock)
        before = datetime.now(UTC)
        result = await engine.run(flow, deadline=timedelta(days=2))
        after = datetime.now(UTC)
        run = await store.get_run(result.run_id)
        (park,) = await store.parks(run_id=result.run_id)
    finally:
        await engine.close()
    assert before + hour <= run.created_at <= after + hour
    assert run.deadline == run.created_at + timedelta(days=2)
    assert park.deadline is not None
    assert before + hour + timedelta(days=1) <= park.deadline <= after + hour + timedelta(days=1)


async def test_a_workers_heartbeat_is_on_the_stores_clock_from_the_first() -> None:
    store = ScriptedStore(reading(3600, 0))
    engine = Engine(store=store, clock=SystemClock(), heartbeat=True)
    try:
        before = datetime.now(UTC)
        engine.sweeper.wake()
        for _ in range(1000):
            if workers := await store.workers():
                break
            await asyncio.sleep(0)  # (the first beat comes after a few loop turns)
        else:
            raise AssertionError("no heartbeat")
    finally:
        await engine.close()
    (worker,) = workers
    assert worker.started_at >= before + timedelta(hours=1)
    assert worker.last_seen >= before + timedelta(hours=1)
