"""An offset clock is another clock's time shifted: what it reads, when its timers fire, and
what it passes through (holds, store round trips, the order of ties)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from flowtide.clock import OffsetClock, SystemClock, VirtualClock

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


async def test_it_reads_the_inner_clock_plus_its_offset() -> None:
    inner = VirtualClock(T0)
    clock = OffsetClock(inner, MINUTE)
    assert clock.now() == T0 + MINUTE
    clock.offset = -MINUTE
    assert clock.now() == T0 - MINUTE
    assert OffsetClock(inner).now() == T0


async def test_a_timer_fires_when_the_shifted_time_reaches_its_instant() -> None:
    inner = VirtualClock(T0)
    clock = OffsetClock(inner, MINUTE)
    fired: list[datetime] = []
    handle = clock.call_at(T0 + MINUTE + timedelta(seconds=10), lambda: fired.append(clock.now()))
    assert handle.when == T0 + MINUTE + timedelta(seconds=10)
    await inner.advance(timedelta(seconds=9))
    assert fired == []
    await inner.advance(timedelta(seconds=1))
    assert fired == [T0 + MINUTE + timedelta(seconds=10)]


async def test_a_cancelled_timer_does_not_fire() -> None:
    inner = VirtualClock(T0)
    clock = OffsetClock(inner, -MINUTE)
    fired: list[str] = []
    clock.call_at(T0, lambda: fired.append("late")).cancel()
    await inner.advance(2 * MINUTE)
    assert fired == []


async def test_sleeping_waits_for_the_shifted_instant() -> None:
    inner = VirtualClock(T0, autojump=True)
    clock = OffsetClock(inner, -MINUTE)
    await clock.sleep_until(T0)  # (a minute away on this clock)
    assert inner.now() == T0 + MINUTE
    await clock.sleep(timedelta(seconds=5))
    assert clock.now() == T0 + timedelta(seconds=5)
    await inner.aclose()


async def test_holds_and_round_trips_are_the_inner_clocks() -> None:
    inner = VirtualClock(T0)
    clock = OffsetClock(inner, MINUTE)
    with clock.hold():
        assert inner.held
    assert not inner.held
    with clock.busy():
        task = asyncio.create_task(inner.settle())
        await asyncio.sleep(0)
        assert not task.done()  # (a virtual clock waits for the round trip to end)
    await task
    assert clock.ties_in_order
    assert not OffsetClock(SystemClock()).ties_in_order


async def test_over_the_system_clock_a_timer_in_the_past_fires_at_once() -> None:
    clock = OffsetClock(SystemClock(), MINUTE)
    fired = asyncio.Event()
    clock.call_at(clock.now() - timedelta(seconds=1), fired.set)
    await fired.wait()
