"""How many sync node attempts may run in threads at once: one slot per worker thread.

An attempt of a thread-executed node takes a slot before it starts (before its start is
committed and its window armed), and the slot comes back when its code has returned in its
thread, not when the attempt ends: a node that timed out keeps its thread busy until its code
returns, and its slot with it. So an attempt never waits for a thread once started, and its
window is never spent in the pool's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["DEFAULT_THREADS", "ThreadSlots"]

DEFAULT_THREADS = 32
"""The worker threads of sync nodes, unless ``Engine(max_threads=...)`` says otherwise."""


class ThreadSlots:
    """``size`` slots, handed out first come, first served."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"the engine needs at least one thread, not {size}")
        self.size = size
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def in_use(self) -> int:
        """How many slots are taken now."""
        return self.size - self._free

    @property
    def waiting(self) -> int:
        """How many attempts wait for a slot now."""
        return sum(not w.done() for w in self._waiters)

    def try_take(self) -> bool:
        """Take a slot if one is free now and nobody waits for one; True if taken."""
        if self._free > 0 and not (self._waiters and self.waiting):
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Take a slot, waiting for one in turn."""
        if self.try_take():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.give()  # (handed a slot as it was cancelled: the next one gets it)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def give(self) -> None:
        """Give a slot back: to the first attempt waiting, else to the free ones."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
