"""The virtual clock drives time explicitly or by autojump; the system clock is real time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowtide.clock import QUIET_PASSES, SystemClock, VirtualClock, isoformat

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_advance_fires_due_callbacks_in_instant_order_then_scheduling_order() -> None:
    clock = VirtualClock(T0)
    fired: list[tuple[str, datetime]] = []
    clock.call_at(t(5), lambda: fired.append(("b", clock.now())))
    clock.call_at(t(1), lambda: fired.append(("a", clock.now())))
    clock.call_at(t(5), lambda: fired.append(("c", clock.now())))
    clock.call_at(t(20), lambda: fired.append(("late", clock.now())))
    cancelled = clock.call_at(t(2), lambda: fired.append(("cancelled", clock.now())))
    cancelled.cancel()
    await clock.advance(timedelta(seconds=10))
    assert fired == [("a", t(1)), ("b", t(5)), ("c", t(5))]
    assert clock.now() == t(10)
    assert clock.next_timer() == t(20)


async def test_the_loop_settles_between_callbacks() -> None:
    clock = VirtualClock(T0)
    seen: list[str] = []

    async def chain() -> None:
        await clock.sleep_until(t(1))
        seen.append(f"woke {clock.now().isoformat()}")
        await clock.sleep(timedelta(seconds=1))
        seen.append(f"woke {clock.now().isoformat()}")

    task = asyncio.create_task(chain())
    await clock.advance(timedelta(seconds=5))
    assert seen == [f"woke {t(1).isoformat()}", f"woke {t(2).isoformat()}"]
    await task


async def test_autojump_runs_a_ten_minute_window_at_once() -> None:
    clock = VirtualClock(T0, autojump=True)
    await clock.sleep(timedelta(minutes=10))
    assert clock.now() == t(600)
    await clock.aclose()


async def test_autojump_waits_while_real_work_is_held() -> None:
    clock = VirtualClock(T0, autojump=True)
    order: list[str] = []

    async def worker() -> None:
        with clock.hold():
            await asyncio.to_thread(lambda: None)
            order.append(f"held work done at {clock.now().isoformat()}")

    timer = asyncio.create_task(clock.sleep(timedelta(seconds=30)))
    await asyncio.sleep(0)
    await worker()
    await timer
    order.append(f"timer at {clock.now().isoformat()}")
    assert order == [f"held work done at {t(0).isoformat()}", f"timer at {t(30).isoformat()}"]
    await clock.aclose()


async def test_settle_waits_for_work_that_keeps_reading_the_time() -> None:
    clock = VirtualClock(T0)
    steps: list[datetime] = []

    async def reader() -> None:
        for _ in range(5 * QUIET_PASSES):
            steps.append(clock.now())
            await asyncio.sleep(0)

    task = asyncio.create_task(reader())
    await clock.settle()
    assert task.done()
    assert len(steps) == 5 * QUIET_PASSES


async def test_autojump_does_not_move_time_under_held_work_that_never_calls_the_clock() -> None:
    clock = VirtualClock(T0, autojump=True)
    seen: list[datetime] = []

    async def busy() -> None:
        with clock.hold():
            for _ in range(10 * QUIET_PASSES):
                await asyncio.sleep(0)  # a bare yield: nothing the clock can see
            seen.append(clock.now())

    timer = asyncio.create_task(clock.sleep(timedelta(seconds=30)))
    await asyncio.sleep(0)
    await busy()
    await timer
    assert seen == [T0]
    assert clock.now() == t(30)
    await clock.aclose()


async def test_two_settles_at_once_do_not_keep_each_other_busy() -> None:
    clock = VirtualClock(T0)
    passes = 0
    stop = False

    async def count_passes() -> None:
        nonlocal passes
        while not stop:
            passes += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_passes())
    await asyncio.gather(clock.settle(), clock.settle())
    stop = True
    await counter
    assert passes <= 2 * QUIET_PASSES


def test_a_clock_that_could_never_settle_is_refused() -> None:
    with pytest.raises(ValueError, match="quiet loop pass"):
        VirtualClock(T0, quiet_passes=0)


async def test_virtual_clock_refuses_to_go_back() -> None:
    clock = VirtualClock(T0)
    with pytest.raises(ValueError, match="back in time"):
        await clock.advance(timedelta(seconds=-1))


def test_naive_start_is_refused() -> None:
    with pytest.raises(ValueError, match="time zone"):
        VirtualClock(datetime(2026, 1, 1))


async def test_system_clock_is_aware_utc_and_fires_past_instants_at_once() -> None:
    clock = SystemClock()
    now = clock.now()
    assert now.tzinfo is UTC
    done = asyncio.Event()
    clock.call_at(now - timedelta(seconds=1), done.set)
    await asyncio.wait_for(done.wait(), 5)


@given(
    st.datetimes(
        min_value=datetime(1, 1, 1),
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), None]),
    )
)
def test_isoformat_is_datetime_isoformat(when: datetime) -> None:
    # The cached prefix must never leak from one instant to another: format twice, and a
    # neighbour in the same minute.
    assert isoformat(when) == when.isoformat()
    assert isoformat(when) == when.isoformat()
    other = when.replace(second=(when.second + 1) % 60, microsecond=0)
    assert isoformat(other) == other.isoformat()


def test_isoformat_of_a_datetime_subclass_is_its_own() -> None:
    class Odd(datetime):
        def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
            return "odd"

    assert isoformat(Odd(2026, 1, 1, tzinfo=UTC)) == "odd"
