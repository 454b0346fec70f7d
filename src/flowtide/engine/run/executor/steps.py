"""The step lock: one step of a run at a time decides, commits and applies.

A step reads the run's view, changes it and commits what changed; nothing else of the run may
decide in between, or its commit could carry a half-made decision of another step (a token
claimed by a timer, say, written by a signal's commit). Every step of a run holds the run's
step lock from its first look at the view to the end of its commit. The lock is reentrant for
the task holding it, so a step may call others (a move that fires a join that moves a token).
A node's code never runs under it: the steps before and after an attempt take it in turn.

Steps queued for the lock are stored together. A step whose commit may wait while others are
queued (:attr:`StepLock.queued`) leaves it to be sent with theirs, applies its decision and
gives the lock to the next (:meth:`StepLock.owe`); it then queues again, and once it has the
lock back sends what was held back unless a later step has done so already (``flush``). Its
step ends when that commit is stored: it is done, or fails with its error, as if it had been
its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType

from flowtide.turns import Turns


async def _nothing_held() -> None:
    """(A lock whose steps never hold a commit back.)"""


class StepLock:
    """The lock itself: its holder, and the steps queued for it, first come first served. A
    free lock is taken without a wait, and one let go is handed to the first step queued (not
    to whoever asks next): every step of a run enters it, most of them while it is free."""

    def __init__(self, flush: Callable[[], Awaitable[None]] = _nothing_held) -> None:
        """``flush``: sends the commits held back (see :meth:`owe`)."""
        self._held = False
        self._owner: asyncio.Task[object] | None = None
        self._turns: Turns[asyncio.Task[object] | None] = Turns()
        self._flush = flush
        self._owed: asyncio.Future[None] | None = None

    @property
    def holder(self) -> asyncio.Task[object] | None:
        """The task holding the lock (None: nobody does)."""
        return self._owner

    @property
    def queued(self) -> int:
        """How many steps wait for the lock."""
        return len(self._turns)

    def hold(self) -> _Held:
        """``async with lock.hold():`` holds the lock for this task (at once if it already
        holds it)."""
        return _Held(self)

    def owe(self, stored: asyncio.Future[None]) -> None:
        """The step holding the lock held its commit back: its step ends once ``stored``."""
        self._owed = stored

    def _take_free(self, me: asyncio.Task[object] | None) -> bool:
        """Take the lock for ``me`` (the current task) if it is free and nobody waits for it."""
        if self._held or self._turns:
            return False
        self._held = True
        self._owner = me
        return True

    async def _take(self, me: asyncio.Task[object] | None) -> None:
        """Take the lock for ``me`` (the current task), in turn: it is handed over by the step
        before (:meth:`_exit`)."""
        await self._turns.wait(me, self._exit)  # (handed it as it was cancelled: passed on)

    def _exit(self) -> asyncio.Future[None] | None:
        """Let go of the lock (to the first step queued, if any); what the step owes (see
        :meth:`owe`)."""
        owed, self._owed = self._owed, None
        if not self._turns.hand(self._hand_to):
            self._held = False
            self._owner = None
        return owed

    def _hand_to(self, task: asyncio.Task[object] | None) -> None:
        self._owner = task

    async def _settle(self, owed: asyncio.Future[None]) -> None:
        """The step's commit was held back: have it stored (the steps queued since have
        decided), and end the step as that commit ends."""
        if not owed.done():
            async with self.hold():
                if not owed.done():
                    await self._flush()
        await asyncio.shield(owed)  # (shared with the other steps held back with it)


class _Held:
    """One hold of a :class:`StepLock` (a plain context manager: it is entered at every step)."""

    __slots__ = ("_lock", "_took")

    def __init__(self, lock: StepLock) -> None:
        self._lock = lock
        self._took = False

    async def __aenter__(self) -> None:
        lock = self._lock
        me = asyncio.current_task()
        if lock._held and lock._owner is me and me is not None:
            return  # held already, by this task
        if not lock._take_free(me):
            await lock._take(me)
        self._took = True

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._took:
            owed = self._lock._exit()
            if owed is not None and error is None:
                # (A step that fails keeps its error; the commit it held back is sent with the
                # next one, or dropped with the run's view.)
                await self._lock._settle(owed)
