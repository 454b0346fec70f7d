"""A step's commit is timed only for instruments that keep durations: an engine without
instruments reads no clock for them."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.clock import VirtualClock
from flowtide.engine.run._commit import commit_step
from flowtide.engine.worker.instruments import NO_INSTRUMENTS, AttemptOutcome, timed
from flowtide.store import Commit, MemoryStore
from flowtide.testing.storechecks.support import new_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class CountingClock(VirtualClock):
    """A virtual clock that counts how often it is read."""

    reads = 0

    def now(self) -> datetime:
        self.reads += 1
        return super().now()


class Kept:
    def __init__(self) -> None:
        self.commits: list[float] = []

    def commit(self, seconds: float) -> None:
        self.commits.append(seconds)

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        pass

    def late(self, seconds: float) -> None:
        pass

    def taken_over(self) -> None:
        pass


async def test_a_commit_reads_the_clock_only_for_instruments_that_keep_durations() -> None:
    store = MemoryStore()
    await new_run(store, "r")
    clock = CountingClock(T0)
    kept = Kept()
    assert timed(kept) and not timed(NO_INSTRUMENTS)
    await commit_step(store, Commit("r"), clock)
    assert clock.reads == 0
    await commit_step(store, Commit("r"), clock, instruments=kept)
    assert clock.reads == 2 and kept.commits == [0.0]
    await clock.aclose()
