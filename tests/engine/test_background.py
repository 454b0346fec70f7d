"""A run's helper task cancelled before it starts drops the coroutine it would have awaited
quietly: no "coroutine ... was never awaited" warning."""

from __future__ import annotations

import asyncio
import gc
import warnings

from flowtide.engine.worker.background import task_awaiting


async def _helper() -> None:
    await asyncio.sleep(0)


async def test_a_task_cancelled_before_it_starts_leaves_no_coroutine_unawaited() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(50):
            awaited = _helper()

            async def runner(awaited: object = awaited) -> None:
                await awaited  # type: ignore[misc]

            task = task_awaiting(runner(), awaited)
            task.cancel()
            del awaited
            await asyncio.gather(task, return_exceptions=True)
            del task
        gc.collect()
    assert [str(w.message) for w in caught] == []


async def test_a_task_that_runs_awaits_its_coroutine() -> None:
    ran: list[str] = []

    async def helper() -> None:
        ran.append("helper")

    awaited = helper()

    async def runner() -> None:
        await awaited

    await task_awaiting(runner(), awaited)
    assert ran == ["helper"]
