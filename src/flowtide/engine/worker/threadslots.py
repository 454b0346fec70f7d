"""How many sync node attempts may run in threads at once: one slot per worker thread.

An attempt of a thread-executed node takes a slot before it starts (before its start is
committed and its window armed), and the slot comes back when its code has returned in its
thread, not when the attempt ends: a node that timed out keeps its thread busy until its code
returns, and its slot with it. So an attempt never waits for a thread once started, and its
window is never spent in the pool's queue.
"""

from __future__ import annotations

from flowtide.turns import Turns

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
        self._turns: Turns[None] = Turns()

    @property
    def in_use(self) -> int:
        """How many slots are taken now."""
        return self.size - self._free

    @property
    def waiting(self) -> int:
        """How many attempts wait for a slot now."""
        return self._turns.waiting

    def try_take(self) -> bool:
        """Take a slot if one is free now and nobody waits for one; True if taken."""
        if self._free > 0 and not (self._turns and self._turns.waiting):
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Take a slot, waiting for one in turn."""
        if self.try_take():
            return
        await self._turns.wait(None, self.give)  # (handed one as it was cancelled: passed on)

    def give(self) -> None:
        """Give a slot back: to the first attempt waiting, else to the free ones."""
        if not self._turns.hand():
            self._free += 1
