"""Who waits on a run, without an engine: a run held here is answered by its executor alone
(nothing looks at the store meanwhile); once let go of, the store is watched for it; the end of a
run that ended here lately is answered without a read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.requests._waiters import RECENT_ENDS, RunWaiters
from flowtide.engine.result import RunResult
from flowtide.store import Store


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

    async def wait_changed(self, seconds: float) -> bool:
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
        waiters.answer(fut, "r", cast(Store, store), lambda: held[0], 60.0, parked=False)
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
        waiters.answer(fut, "r", cast(Store, store), lambda: held[0], 60.0, parked=False)
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
        waiters.answer(fut, "r", cast(Store, store), lambda: True, 60.0, parked=False)
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
        waiters.answer(fut, "r", cast(Store, store), lambda: held[0], 60.0, parked=False)
    )
    await asyncio.sleep(0)
    held[0] = False
    answer.cancel()  # (the caller gives up: gone at the next turn of the loop)
    waiters.let_go("r")  # (its watch would start at the next turn, after it)
    for _ in range(5):
        await asyncio.sleep(0)
    assert answer.cancelled() and store.looks == 0
    assert asyncio.all_tasks() <= before  # (no watch left running)
