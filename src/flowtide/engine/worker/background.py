"""Background tasks: those that await a coroutine made before the task starts, and those
nobody awaits.

A task cancelled before its first step never runs its coroutine: a coroutine that coroutine
would have awaited is then dropped unawaited, and Python warns of it ("coroutine ... was never
awaited") when it is collected. That happens to a run's helper task (a request fired, a timer)
when the run is let go in the same turn of the loop that started it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["consumed", "task_awaiting"]


def task_awaiting(
    runner: Coroutine[Any, Any, None], awaited: Coroutine[Any, Any, Any]
) -> asyncio.Task[None]:
    """A task of ``runner``, which awaits ``awaited``: once the task is done, ``awaited`` is
    closed (nothing, if it ran; if the task was cancelled before it started, it is dropped
    quietly rather than left unawaited)."""
    task = asyncio.get_running_loop().create_task(runner)
    task.add_done_callback(lambda _: awaited.close())
    return task


def consumed(task: asyncio.Task[Any]) -> None:
    """A done callback for a task nobody awaits: its error is retrieved (the task's own code
    logs what matters), so that Python does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()
