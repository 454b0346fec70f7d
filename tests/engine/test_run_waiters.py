"""Who waits on a run driven by another worker looks at the store at every notice and at least
every ``poll`` on the engine's clock (never on the loop's time): a virtual clock moved by a poll
brings a look, and nothing else does."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from flowtide.clock import VirtualClock
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.requests._waiters import RunWaiters
from flowtide.store import MemoryStore, RunRecord
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


async def test_a_run_held_here_is_looked_at_again_a_poll_after_it_is_let_go() -> None:
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
    await clock.advance(timedelta(seconds=2 * POLL))  # (the held run's pause, then a poll)
    assert (await answer).lifecycle == Lifecycle.FAILED
    assert store.looks == 1 and clock.next_timer() is None
