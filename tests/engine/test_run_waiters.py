"""Who waits on a run, without an engine: a run held here is answered by its executor alone
(nothing looks at the store meanwhile); once let go of, the store is watched for it, at every
notice and at least every ``poll`` on the engine's clock (never on the loop's time); the end of a
run that ended here lately is answered without a read."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from flowtide.clock import VirtualClock
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.requests._waiters import RECENT_ENDS, RunWaiters
from flowtide.engine.result import RunResult
from flowtide.store import MemoryStore, RunRecord, Store
from flowtide.testing.storechecks.support import new_run

POLL = 3600.0
"""An hour: the loop's time never reaches it in a test, only the virtual clock does."""


class QuietStore(MemoryStore):
    """A store that tells of no change (only the poll brings a look), counting the looks at its
    run, whose record is ``record``."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.record: RunRecord | None = None

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        await asyncio.Event().wait()  # (no notice ever comes)
        return True

    async def get_run(self, run_id: str) -> RunRecord:
        self.looks += 1
        assert self.record is not None
        return self.record


async def quiet_store() -> QuietStore:
    store = QuietStore()
    store.record = await new_run(store, "r", lifecycle=Lifecycle.RUNNING)
    return store


async def test_a_run_driven_elsewhere_is_looked_at_every_poll_of_the_clock() -> None:
    clock = VirtualClock()
    store = await quiet_store()
    waiters = RunWaiters()
    fut = waiters.end("r")
    answer = asyncio.create_task(
        waiters.answer(fut, "r", store, lambda: False, clock, POLL, parked=False)
    )
    await clock.advance(timedelta(seconds=POLL - 1))
    assert store.looks == 0
    await clock.advance(timedelta(seconds=1))
    assert store.looks == 1 and not answer.done()
    await clock.advance(timedelta(seconds=POLL))
    assert store.looks == 2 and not answer.done()
    assert store.record is not None
    store.record = dataclasses.replace(store.record, lifecycle=Lifecycle.COMPLETED, outcome="done")
    await clock.advance(timedelta(seconds=POLL))
    result = await answer
    assert (result.lifecycle, result.outcome, store.looks) == (Lifecycle.COMPLETED, "done", 3)


async def test_a_run_held_here_is_looked_at_a_poll_after_it_is_let_go() -> None:
    clock = VirtualClock()
    store = await quiet_store()
    waiters = RunWaiters()
    fut = waiters.end("r")
    held = True
    answer = asyncio.create_task(
        waiters.answer(fut, "r", store, lambda: held, clock, POLL, parked=False)
    )
    await clock.advance(timedelta(seconds=10 * POLL))
    assert store.looks == 0  # (its executor here answers)
    held = False
    assert store.record is not None
    store.record = dataclasses.replace(store.record, lifecycle=Lifecycle.FAILED)
    waiters.let_go("r")
    await asyncio.sleep(0)  # (the watch starts at the next turn of the loop)
    await clock.advance(timedelta(seconds=POLL))
    assert (await answer).lifecycle == Lifecycle.FAILED
    assert store.looks == 1 and clock.next_timer() is None


@dataclass
class StoredRun:
    id: str
    lifecycle: str
    result: dict[str, Any] | None


@dataclass
class StandInStore:
    """Counts its reads; ``runs``: what it holds (run id -> lifecycle, result)."""

    runs: dict[str, RunResult] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    looks: int = 0

    async def get_run(self, run_id: str) -> StoredRun:
        self.reads.append(run_id)
        result = self.runs.get(run_id)
        if result is None:
            return StoredRun(run_id, "running", None)
        return StoredRun(run_id, result.lifecycle.value, result.to_dict())

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        self.looks += 1
        await asyncio.sleep(0)
        return True


def completed(run_id: str) -> RunResult:
    return RunResult(run_id=run_id, lifecycle=Lifecycle.COMPLETED, outcome="done", state={})


async def test_a_run_that_ended_here_lately_is_answered_without_a_read() -> None:
    waiters, store = RunWaiters(), StandInStore()
    waiters.ended(completed("r"))
    fut = waiters.end("r")
    await waiters.from_store(cast(Store, store), "r")
    assert fut.result() == completed("r") and store.reads == []
    # (Only the latest are kept: an older one is read again.)
    for i in range(RECENT_ENDS):
        waiters.ended(completed(f"other-{i}"))
    store.runs["r"] = completed("r")
    fut = waiters.end("r")
    await waiters.from_store(cast(Store, store), "r")
    assert fut.result() == completed("r") and store.reads == ["r"]


async def test_a_run_held_here_is_not_watched_until_it_is_let_go() -> None:
    waiters, store = RunWaiters(), StandInStore()
    held = [True]
    fut = waiters.end("r")
    before = asyncio.all_tasks()
    answer = asyncio.ensure_future(
        waiters.answer(
            fut, "r", cast(Store, store), lambda: held[0], VirtualClock(), 60.0, parked=False
        )
    )
    for _ in range(10):
        await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == {answer}  # (no watch)
    assert store.looks == 0 and store.reads == []
    # Let go of here, and ended elsewhere: the store is watched, and answers.
    held[0] = False
    store.runs["r"] = completed("r")
    waiters.let_go("r")
    assert (await asyncio.wait_for(answer, 5)) == completed("r")
    assert store.looks >= 1 and store.reads == ["r"]


async def test_a_watch_that_finds_the_run_held_here_again_stops_until_it_is_let_go() -> None:
    waiters, store = RunWaiters(), StandInStore()
    held = [False]
    fut = waiters.end("r")
    answer = asyncio.ensure_future(
        waiters.answer(
            fut, "r", cast(Store, store), lambda: held[0], VirtualClock(), 60.0, parked=False
        )
    )
    for _ in range(5):
        await asyncio.sleep(0)
    assert store.looks >= 1  # (not held: watched)
    held[0] = True
    for _ in range(5):
        await asyncio.sleep(0)
    looks = store.looks
    for _ in range(10):
        await asyncio.sleep(0)
    assert store.looks == looks  # (held here again: its executor answers)
    held[0] = False
    store.runs["r"] = completed("r")
    waiters.let_go("r")
    assert (await asyncio.wait_for(answer, 5)) == completed("r")


async def test_a_run_that_ends_here_answers_its_waiters_and_leaves_nothing_registered() -> None:
    waiters, store = RunWaiters(), StandInStore()
    fut = waiters.end("r")
    answer = asyncio.ensure_future(
        waiters.answer(
            fut, "r", cast(Store, store), lambda: True, VirtualClock(), 60.0, parked=False
        )
    )
    await asyncio.sleep(0)
    waiters.ended(completed("r"))
    assert (await answer) == completed("r")
    waiters.let_go("r")  # (nothing left to start)
    assert store.looks == 0 and store.reads == []


async def test_a_waiter_that_gives_up_leaves_no_watch_behind() -> None:
    waiters, store = RunWaiters(), StandInStore()
    held = [True]
    fut = waiters.end("r")
    before = asyncio.all_tasks()
    answer = asyncio.ensure_future(
        waiters.answer(
            fut, "r", cast(Store, store), lambda: held[0], VirtualClock(), 60.0, parked=False
        )
    )
    await asyncio.sleep(0)
    held[0] = False
    answer.cancel()  # (the caller gives up: gone at the next turn of the loop)
    waiters.let_go("r")  # (its watch would start at the next turn, after it)
    for _ in range(5):
        await asyncio.sleep(0)
    assert answer.cancelled() and store.looks == 0
    assert asyncio.all_tasks() <= before  # (no watch left running)
