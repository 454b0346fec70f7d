"""The eager-start primitive: a coroutine's first step runs in the current task; a task takes
over only when it suspends, and a cancel of that task reaches the coroutine wherever it waits."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from flowtide.engine import eager

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def test_a_coroutine_that_does_not_suspend_runs_at_once_without_a_task() -> None:
    log: list[Any] = []
    me = asyncio.current_task()

    async def quick() -> int:
        log.append(asyncio.current_task() is me)
        return 7

    before = eager.handoffs
    task = eager.start(quick(), asyncio.get_running_loop())
    assert task is None
    assert log == [True]  # ran already, in this task
    assert eager.handoffs == before


async def test_an_exception_of_the_first_step_reaches_the_caller() -> None:
    async def broken() -> None:
        raise ValueError("first step")

    with pytest.raises(ValueError, match="first step"):
        eager.start(broken(), asyncio.get_running_loop())


async def test_a_coroutine_that_suspends_goes_on_in_a_task_of_its_own() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[Any] = []

    async def waits() -> int:
        log.append(("first", asyncio.current_task() is me))
        value = await fut
        log.append(("then", asyncio.current_task() is me))
        await asyncio.sleep(0)  # a bare yield too
        return value + 1

    before = eager.handoffs
    task = eager.start(waits(), loop)
    assert task is not None
    assert eager.handoffs == before + 1
    assert log == [("first", True)]
    await asyncio.sleep(0)
    assert not task.done()
    fut.set_result(41)
    assert await task == 42
    assert log == [("first", True), ("then", False)]


async def test_a_future_done_before_the_task_first_steps_is_still_seen() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()

    async def waits() -> str:
        return await fut

    task = eager.start(waits(), loop)
    assert task is not None
    fut.set_result("early")  # before the task ran at all
    assert await task == "early"


@pytest.mark.parametrize("before_first_step", [True, False])
async def test_a_cancel_of_the_task_reaches_the_coroutine_where_it_waits(
    before_first_step: bool,
) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    observed: list[str] = []

    async def waits() -> None:
        try:
            await fut
        except asyncio.CancelledError:
            observed.append("cancelled")
            raise

    task = eager.start(waits(), loop)
    assert task is not None
    if not before_first_step:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert observed == ["cancelled"]
    assert fut.cancelled()  # as a task's cancel cancels the future it waits on


async def test_a_coroutine_may_swallow_the_cancel_and_finish() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def stubborn() -> str:
        try:
            await fut
        except asyncio.CancelledError:
            return "kept going"
        return "done"

    task = eager.start(stubborn(), loop)
    assert task is not None
    task.cancel()
    assert await task == "kept going"


async def test_the_first_step_runs_in_a_copy_of_the_context_the_task_keeps() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def sets() -> str:
        seen.set("branch")
        await fut
        return seen.get()

    async def quick() -> None:
        seen.set("quick")

    assert eager.start(quick(), loop) is None
    task = eager.start(sets(), loop)
    assert task is not None
    assert seen.get() == "unset"  # the caller's context is untouched
    fut.set_result(None)
    assert await task == "branch"


async def test_the_home_task_is_known_during_a_first_step_it_was_given() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    fut: asyncio.Future[None] = loop.create_future()
    homes: list[object] = []

    async def looks() -> None:
        homes.append(eager.home)
        await fut
        homes.append(eager.home)  # in its own task now: nobody told it

    task = eager.start(looks(), loop, me)
    assert eager.home is None
    assert task is not None
    fut.set_result(None)
    await task
    assert homes == [me, None]
