"""What an engine measures of itself, told to its instruments: each commit's latency, each node
attempt's duration, how late the sweeper takes the runs due, and runs it takes over; all
on the engine's clock (virtual time here)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle
from flowtide.engine.worker.instruments import NO_INSTRUMENTS, AttemptOutcome
from tests.engine.engine_helpers import T0, freeze, fresh_store
from tests.engine.test_engine_leases import approval_flow, slow_flow
from tests.engine.test_engine_store_errors import FlakyStore, chain

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


class Recorded:
    """Instruments that keep every measure."""

    def __init__(self) -> None:
        self.commits: list[float] = []
        self.attempts: list[tuple[AttemptOutcome, float]] = []
        self.lateness: list[float] = []
        self.takeovers = 0

    def commit(self, seconds: float) -> None:
        self.commits.append(seconds)

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        self.attempts.append((outcome, seconds))

    def late(self, seconds: float) -> None:
        self.lateness.append(seconds)

    def taken_over(self) -> None:
        self.takeovers += 1


async def test_each_commit_and_each_attempt_is_measured() -> None:
    clock = VirtualClock(T0, autojump=True)
    seen = Recorded()
    store = fresh_store()
    async with Engine(store=store, clock=clock, instruments=seen) as engine:
        finished = await engine.run(slow_flow())
        parked = await engine.run(approval_flow())
    await clock.aclose()
    await store.close()
    assert finished.lifecycle is Lifecycle.COMPLETED and parked.lifecycle is Lifecycle.PARKED
    # The node's code slept 100 s of the engine's clock; the other one parked at once.
    assert seen.attempts == [("ok", 100.0), ("park", 0.0)]
    # Every step's commit, each answered at once on virtual time.
    assert len(seen.commits) >= 4 and set(seen.commits) == {0.0}


async def test_a_commit_tried_again_is_measured_from_its_first_try() -> None:
    clock = VirtualClock(T0, autojump=True)
    seen = Recorded()
    async with Engine(store=FlakyStore({2}), clock=clock, instruments=seen) as engine:
        result = await engine.run(chain())
    await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED
    # The second commit after the run's creation failed once: tried again after the first
    # backoff (0.1 s). (The run is created with its first commit, measured as a commit.)
    assert seen.commits[2] == pytest.approx(0.1)
    assert sorted(seen.commits)[:-1] == [0.0] * (len(seen.commits) - 1)


async def test_lateness_is_how_long_after_its_wake_instant_a_run_is_taken() -> None:
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    frozen = Engine(clock=clock, store=store, owner="frozen", lease_ttl=ttl)
    seen = Recorded()
    try:
        handle = await frozen.start(slow_flow())
        await clock.advance(timedelta(seconds=1))
        await freeze(frozen)  # (its lease expires at 30 s: the run's wake instant)
        await clock.advance(timedelta(seconds=44))
        rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=ttl, instruments=seen)
        try:
            rescuer.sweeper  # noqa: B018 - it looks for work from now on (45 s)
            await clock.advance(timedelta(seconds=1))
            assert seen.lateness == [15.0]
            await clock.advance(timedelta(seconds=100))
            assert (await rescuer.wait(handle.run_id)).lifecycle is Lifecycle.COMPLETED
        finally:
            await rescuer.close()
    finally:
        await frozen.close()
        await clock.aclose()
        await store.close()
    assert seen.takeovers == 1  # (the rescuer took the run from the frozen worker)


async def test_a_run_whose_lease_expired_is_counted_once_by_the_worker_that_takes_it() -> None:
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    lost, seen = Recorded(), Recorded()
    frozen = Engine(clock=clock, store=store, owner="frozen", lease_ttl=ttl, instruments=lost)
    try:
        handle = await frozen.start(slow_flow())
        await clock.advance(timedelta(seconds=1))
        await freeze(frozen)  # (as a worker that died: its lease expires at 30 s)
        taker = Engine(clock=clock, store=store, owner="taker", lease_ttl=ttl, instruments=seen)
        try:
            taker.sweeper  # noqa: B018 - it looks for work from now on
            await clock.advance(timedelta(seconds=28))
            assert seen.takeovers == 0  # (the lease is alive until 30 s)
            await clock.advance(timedelta(seconds=1))
            assert seen.takeovers == 1
            await clock.advance(timedelta(seconds=200))
            assert (await taker.wait(handle.run_id)).lifecycle is Lifecycle.COMPLETED
        finally:
            await taker.close()
    finally:
        await frozen.close()
        await clock.aclose()
        await store.close()
    assert (seen.takeovers, lost.takeovers) == (1, 0)


async def test_a_run_resumed_by_another_engine_is_counted_there_not_where_it_was_taken() -> None:
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    lost, seen = Recorded(), Recorded()
    holder = Engine(clock=clock, store=store, owner="w1", lease_ttl=ttl, instruments=lost)
    other = Engine(clock=clock, store=store, owner="w2", lease_ttl=ttl, instruments=seen)
    try:
        handle = await holder.start(slow_flow())
        await clock.advance(timedelta(seconds=1))
        await other.resume(handle.run_id)  # (forced from w1's live lease)
        assert seen.takeovers == 1
        await other.resume(handle.run_id)  # (held there already: nothing taken)
        await clock.advance(timedelta(seconds=10))  # (w1's next renewal finds it gone)
        assert handle.run_id not in holder.held_runs()
        assert (seen.takeovers, lost.takeovers) == (1, 0)
    finally:
        await other.close()
        await holder.close()
        await clock.aclose()
        await store.close()


async def test_a_run_nobody_held_is_not_counted() -> None:
    clock = VirtualClock(T0, autojump=True)
    seen = Recorded()
    store = fresh_store()
    async with Engine(store=store, clock=clock) as client:
        parked = await client.run(approval_flow())  # (parked: given back)
    async with Engine(store=store, clock=clock, instruments=seen) as engine:
        await engine.resume(parked.run_id)
    await clock.aclose()
    await store.close()
    assert seen.takeovers == 0


def test_an_engine_measures_nothing_by_default() -> None:
    assert Engine().instruments is NO_INSTRUMENTS
