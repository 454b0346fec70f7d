"""The step lock: one step of a run at a time decides, commits and applies.

A step reads the run's view, changes it and commits what changed; nothing else of the run may
decide in between, or its commit could carry a half-made decision of another step (a token
claimed by a timer, say, written by a signal's commit). Every step of a run holds the run's
step lock from its first look at the view to the end of its commit. The lock is reentrant for
the task holding it, so a step may call others (a move that fires a join that moves a token).
A node's code never runs under it: the steps before and after an attempt take it in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class StepLock:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[object] | None = None

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Hold the lock for this task (at once if it already holds it)."""
        me = asyncio.current_task()
        if me is not None and self._owner is me:
            yield
            return
        async with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None
