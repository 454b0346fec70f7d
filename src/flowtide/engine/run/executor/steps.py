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
from types import TracebackType


class StepLock:
    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[object] | None = None

    def hold(self) -> _Held:
        """``async with lock.hold():`` holds the lock for this task (at once if it already
        holds it)."""
        return _Held(self)

    async def _enter(self) -> bool:
        me = asyncio.current_task()
        if me is not None and self._owner is me:
            return False  # held already, by this task
        await self._lock.acquire()
        self._owner = me
        return True

    def _exit(self) -> None:
        self._owner = None
        self._lock.release()


class _Held:
    """One hold of a :class:`StepLock` (a plain context manager: it is entered at every step)."""

    __slots__ = ("_lock", "_took")

    def __init__(self, lock: StepLock) -> None:
        self._lock = lock
        self._took = False

    async def __aenter__(self) -> None:
        self._took = await self._lock._enter()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._took:
            self._lock._exit()
