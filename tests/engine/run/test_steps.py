"""The step lock: a step that held its commit back lets the queued steps decide, then has it
stored (unless a later step did), and ends as that commit ends; without an engine or a store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from flowtide.engine.run.executor.steps import StepLock


class Held:
    """A stand-in for the commits held back: stored by :meth:`flush` (or refused with
    ``error``)."""

    def __init__(self, said: list[str], error: Exception | None = None) -> None:
        self.said = said
        self.error = error
        self.stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stored.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def flush(self) -> None:
        if self.stored.done():
            return
        self.said.append("flushed")
        await asyncio.sleep(0)  # (a round trip)
        if self.error is not None:
            self.stored.set_exception(self.error)
            raise self.error
        self.stored.set_result(None)


async def two_steps(
    lock: StepLock, held: Held, said: list[str], *, second_flushes: bool = False
) -> list[BaseException | None]:
    """A first step that holds its commit back while a second is queued, then the second."""
    holding = asyncio.Event()

    async def first() -> None:
        async with lock.hold():
            holding.set()
            await asyncio.sleep(0)  # (the second step queues meanwhile)
            assert lock.queued == 1
            said.append("first decided")
            lock.owe(held.stored)
        said.append("first done")

    async def second() -> None:
        await holding.wait()
        async with lock.hold():
            said.append("second decided")
            if second_flushes:
                await held.flush()
        said.append("second done")

    outcomes = await asyncio.gather(first(), second(), return_exceptions=True)
    return [o if isinstance(o, BaseException) else None for o in outcomes]


async def test_a_step_that_held_its_commit_back_ends_once_it_is_stored() -> None:
    said: list[str] = []
    held = Held(said)
    lock = StepLock(held.flush)
    assert await two_steps(lock, held, said) == [None, None]
    # The second step decided before the commit held back was sent; the first step comes back
    # for the lock and sends it, and ends once it is stored.
    assert said == ["first decided", "second decided", "second done", "flushed", "first done"]
    assert lock.queued == 0


async def test_a_commit_held_back_and_sent_by_a_later_step_is_not_sent_again() -> None:
    said: list[str] = []
    held = Held(said)
    lock = StepLock(held.flush)
    assert await two_steps(lock, held, said, second_flushes=True) == [None, None]
    assert said.count("flushed") == 1
    assert said.index("flushed") < said.index("first done")


async def test_a_commit_held_back_that_is_refused_fails_the_step_that_held_it_back() -> None:
    said: list[str] = []
    refused = RuntimeError("refused")
    held = Held(said, refused)
    lock = StepLock(held.flush)
    first, second = await two_steps(lock, held, said)
    assert first is refused and second is None
    assert "first done" not in said


async def test_a_step_that_fails_after_holding_its_commit_back_keeps_its_own_error() -> None:
    said: list[str] = []
    held = Held(said)
    lock = StepLock(held.flush)
    blocker = asyncio.Event()

    async def failing() -> None:
        async with lock.hold():
            await asyncio.sleep(0)
            lock.owe(held.stored)
            raise ValueError("its own")

    async def queued() -> None:
        async with lock.hold():
            blocker.set()

    with pytest.raises(ValueError, match="its own"):
        await asyncio.gather(failing(), queued())
    await blocker.wait()
    async with lock.hold():  # (the lock is free again)
        assert lock.queued == 0


async def queue_behind_first(
    lock: StepLock, said: list[str], let_go: Callable[[], object] = lambda: None
) -> tuple[asyncio.Event, Any]:
    """A first step holding ``lock`` until told (``let_go``: called as soon as it has let go),
    and two steps queued behind it."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with lock.hold():
            entered.set()
            await release.wait()
        let_go()

    async def step(name: str) -> None:
        async with lock.hold():
            said.append(name)

    tasks = [asyncio.create_task(first())]
    await entered.wait()
    tasks += [asyncio.create_task(step("second")), asyncio.create_task(step("third"))]
    await asyncio.sleep(0)
    assert lock.queued == 2
    return release, tasks


async def test_steps_queued_for_the_lock_hold_it_in_turn_and_a_cancelled_one_drops_out() -> None:
    lock = StepLock()
    said: list[str] = []
    release, (first, second, third) = await queue_behind_first(lock, said)
    second.cancel()
    release.set()
    await asyncio.gather(first, second, third, return_exceptions=True)
    assert second.cancelled() and said == ["third"]
    assert lock.queued == 0 and lock.holder is None
    async with lock.hold():  # (free again)
        said.append("later")
    assert said == ["third", "later"]


async def test_a_step_cancelled_as_it_is_handed_the_lock_hands_it_on() -> None:
    lock = StepLock()
    said: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    # (Cancelled once the first step let go: the lock is handed to it, and it has not run yet.)
    release, tasks[:] = await queue_behind_first(lock, said, lambda: tasks[1].cancel())
    first, second, third = tasks
    release.set()
    await asyncio.gather(first, second, third, return_exceptions=True)
    assert second.cancelled() and said == ["third"]
    assert lock.queued == 0 and lock.holder is None


async def test_a_step_holding_the_lock_enters_it_again_at_once() -> None:
    lock = StepLock()
    async with lock.hold():
        holder = lock.holder
        async with lock.hold():
            assert lock.holder is holder is asyncio.current_task()
        assert lock.holder is holder
    assert lock.holder is None
