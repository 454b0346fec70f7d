"""Group commit on PostgreSQL: the commits sent whole that come while one is in flight share
the next transaction (one round trip, one flush of the write-ahead log).

A commit sent whole (:func:`~flowtide.store.postgres.commits.sends_whole`) goes at once, in its
caller's task, when nothing is in flight: nothing waits for company. Those that come meanwhile
wait; the next group takes them (up to :data:`GROUP_LIMIT`), sorted by run id (every group locks
runs in one order, so two groups never wait for each other in a circle), into one transaction,
and answers each only once it has committed. If the transaction fails, none of it applied: each
of its commits is then sent again on its own (which tells the refused one why) — unless the
database could not be reached, when whether it applied is unknown, and each is told so.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from flowtide.store.base import StoreDown
from flowtide.store.postgres.commits import Prepared

__all__ = ["GROUP_LIMIT", "CommitGroups"]

GROUP_LIMIT = 64
"""The most commits one transaction takes (the rest wait for the next)."""


@dataclass(slots=True, eq=False)
class _Waiting:
    prepared: Prepared
    answer: asyncio.Future[int]


class CommitGroups:
    """Commits sent whole on one store, grouped. ``alone``: one commit sent on its own, which
    returns the seq of its first event; ``together``: a group sent in one transaction, which
    returns each one's, in order."""

    def __init__(
        self,
        alone: Callable[[Prepared], Awaitable[int]],
        together: Callable[[list[Prepared]], Awaitable[list[int]]],
    ) -> None:
        self._alone = alone
        self._together = together
        self._waiting: deque[_Waiting] = deque()
        self._flying = False
        self._next: asyncio.Task[None] | None = None

    async def commit(self, prepared: Prepared) -> int:
        """Apply ``prepared``; the seq of its first event."""
        if not self._flying:
            self._flying = True
            try:
                return await self._alone(prepared)
            finally:
                self._land()
        waiting = _Waiting(prepared, asyncio.get_running_loop().create_future())
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
            group: list[_Waiting] = []
            while self._waiting and len(group) < GROUP_LIMIT:
                waiting = self._waiting.popleft()
                if not waiting.answer.done():  # (its caller gave up before it was sent)
                    group.append(waiting)
            group.sort(key=lambda w: w.prepared.commit.run_id)
            if group:
                await self._send(group)
        finally:
            self._land()

    async def _send(self, group: list[_Waiting]) -> None:
        try:
            firsts = await self._together([w.prepared for w in group])
        except StoreDown as error:
            for w in group:
                _tell(w, error=error)
            return
        except Exception:  # (nothing applied: each alone tells its own answer)
            for w in group:
                try:
                    _tell(w, await self._alone(w.prepared))
                except Exception as error:
                    _tell(w, error=error)
            return
        for w, first in zip(group, firsts, strict=True):
            _tell(w, first)


def _tell(waiting: _Waiting, first: int = 0, *, error: BaseException | None = None) -> None:
    """Answer a waiting commit (unless its caller gave up waiting)."""
    if waiting.answer.done():
        return
    if error is not None:
        waiting.answer.set_exception(error)
    else:
        waiting.answer.set_result(first)
