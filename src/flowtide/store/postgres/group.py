"""Group commit on PostgreSQL: the commits sent whole that come while one is in flight share
the next transaction (one round trip, one flush of the write-ahead log); so do the reads of runs'
snapshots (one statement).

A commit sent whole (:func:`~flowtide.store.postgres.commits.sends_whole`) goes at once, in its
caller's task, when nothing is in flight: nothing waits for company. Those that come meanwhile
wait; the next group takes them (up to :data:`GROUP_LIMIT`), sorted by run id (every group locks
runs in one order, so two groups never wait for each other in a circle), into one transaction,
and answers each only once it has committed. If the transaction fails, none of it applied: each
of its commits is then sent again on its own (which tells the refused one why) — unless the
database could not be reached, when whether it applied is unknown, and each is told so. Reads
are grouped the same way (:class:`Groups` of any kind of item).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from flowtide.store.base import StoreDown

__all__ = ["GROUP_LIMIT", "Groups"]

T = TypeVar("T")
R = TypeVar("R")

GROUP_LIMIT = 64
"""The most commits one transaction takes (the rest wait for the next)."""


@dataclass(slots=True, eq=False)
class _Waiting(Generic[T, R]):
    item: T
    answer: asyncio.Future[R]


class Groups(Generic[T, R]):
    """Items (commits sent whole, reads) on one store, grouped. ``alone``: one item sent on its
    own, which returns its answer (a commit's: the seq of its first event); ``together``: a
    group sent in one transaction, which returns each one's, in order; ``order``: the key a
    group is sorted by (a commit's run id)."""

    def __init__(
        self,
        alone: Callable[[T], Awaitable[R]],
        together: Callable[[list[T]], Awaitable[list[R]]],
        order: Callable[[T], str],
    ) -> None:
        self._alone = alone
        self._together = together
        self._order = order
        self._waiting: deque[_Waiting[T, R]] = deque()
        self._flying = False
        self._next: asyncio.Task[None] | None = None

    async def send(self, item: T) -> R:
        """Send ``item``, alone or in a group; its answer."""
        if not self._flying:
            self._flying = True
            try:
                return await self._alone(item)
            finally:
                self._land()
        waiting: _Waiting[T, R] = _Waiting(item, asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        return await waiting.answer

    def _land(self) -> None:
        """A flight ended: the next group takes off, if any waits."""
        if self._waiting:
            self._next = asyncio.ensure_future(self._fly())
        else:
            self._flying = False

    async def _fly(self) -> None:
        try:
            group: list[_Waiting[T, R]] = []
            while self._waiting and len(group) < GROUP_LIMIT:
                waiting = self._waiting.popleft()
                if not waiting.answer.done():  # (its caller gave up before it was sent)
                    group.append(waiting)
            group.sort(key=lambda w: self._order(w.item))
            if group:
                await self._send(group)
        finally:
            self._land()

    async def _send(self, group: list[_Waiting[T, R]]) -> None:
        try:
            answers = await self._together([w.item for w in group])
        except StoreDown as error:
            for w in group:
                _fail(w, error)
            return
        except Exception:  # (nothing applied: each alone tells its own answer)
            for w in group:
                try:
                    _answer(w, await self._alone(w.item))
                except Exception as error:
                    _fail(w, error)
            return
        for w, answer in zip(group, answers, strict=True):
            _answer(w, answer)


def _answer(waiting: _Waiting[T, R], answer: R) -> None:
    """Answer a waiting item (unless its caller gave up waiting)."""
    if not waiting.answer.done():
        waiting.answer.set_result(answer)


def _fail(waiting: _Waiting[T, R], error: BaseException) -> None:
    """Tell a waiting item why it failed (unless its caller gave up waiting)."""
    if not waiting.answer.done():
        waiting.answer.set_exception(error)
