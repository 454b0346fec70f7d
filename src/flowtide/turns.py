"""Waiting in turn: whoever lets go hands its turn to the first still waiting (not to whoever
asks next), and one cancelled just as it is handed its turn passes it on. The step lock of a run
and the engine's thread slots are both handed over this way."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Turns"]

T = TypeVar("T")


class Turns(Generic[T]):
    """A queue of waiters, each named by a ``T`` (who it is, for whoever hands it the turn)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[asyncio.Future[None], T]] = deque()

    def __len__(self) -> int:
        """How many wait in the queue (one cancelled may stay until its task next runs)."""
        return len(self._queue)

    @property
    def waiting(self) -> int:
        """How many wait and have not been cancelled."""
        return sum(not handed.done() for handed, _ in self._queue)

    async def wait(self, who: T, pass_on: Callable[[], object]) -> None:
        """Wait, as ``who``, until handed the turn (:meth:`hand`). Cancelled meanwhile: leave the
        queue, or, if the turn was handed already, ``pass_on()`` (give it to the next)."""
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (handed, who)
        self._queue.append(entry)
        try:
            await handed
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():
                pass_on()
            else:
                with contextlib.suppress(ValueError):
                    self._queue.remove(entry)
            raise

    def hand(self, to: Callable[[T], object] | None = None) -> bool:
        """Hand the turn to the first still waiting, calling ``to(who)`` first; False if nobody
        waits."""
        while self._queue:
            handed, who = self._queue.popleft()
            if not handed.done():
                if to is not None:
                    to(who)
                handed.set_result(None)
                return True
        return False
