"""Waiting for a run's result: its end (:meth:`~flowtide.engine.Engine.wait`) or its next
quiescent point parked on the outside world (``run``, ``wait_parked``), whichever engine drives
it: answered by its executor when it is held here, else from the store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from flowtide.clock import Clock
from flowtide.engine.requests._waiters import RunWaiters
from flowtide.engine.result import RunResult
from flowtide.engine.run.executor.core import RunExecutor
from flowtide.store.base import Store

__all__ = ["ResultWaiting", "WaitingEngine"]


class WaitingEngine(Protocol):
    """What :class:`ResultWaiting` reads of its engine (read when asked)."""

    store: Store
    clock: Clock
    poll: float


class ResultWaiting:
    """The results of ``engine``'s runs, for whoever waits in ``waiters``: ``held`` are the
    executors it holds (by run id); ``caught_up``: returns once the hooks have been given every
    event published so far (a result is answered after its events)."""

    def __init__(
        self,
        engine: WaitingEngine,
        waiters: RunWaiters,
        held: Mapping[str, RunExecutor],
        caught_up: Callable[[], Awaitable[None]],
    ) -> None:
        self._engine = engine
        self._waiters = waiters
        self._runs = held
        self._caught_up = caught_up

    async def end(self, run_id: str) -> RunResult:
        """The run's result once it has ended (at once if it already has)."""
        fut = self._waiters.end(run_id)
        held = self._runs.get(run_id)
        if held is None or held.released:  # (else its executor here answers, at its end)
            await self._waiters.from_store(self._engine.store, run_id)
        return await self.answer(fut, run_id, parked=False)

    async def parked(self, run_id: str) -> RunResult:
        """The run at its next quiescent point parked on the outside world, or its end."""
        fut = self._waiters.settle(run_id)
        held = self._runs.get(run_id)
        if held is None:
            # Not held here (let go, or ended): what the store holds is the whole story.
            await self._waiters.from_store(self._engine.store, run_id, parked=True)
        elif (now := held.settler.parked_now()) is not None:
            self._waiters.settled(now)  # (held, and parked already)
        return await self.answer(fut, run_id, parked=True)

    async def answer(
        self, fut: asyncio.Future[RunResult], run_id: str, *, parked: bool
    ) -> RunResult:
        """``fut``'s result; while another worker drives the run, answered from the store."""
        e = self._engine
        result = await self._waiters.answer(
            fut, run_id, e.store, lambda: run_id in self._runs, e.clock, e.poll, parked=parked
        )
        await self._caught_up()
        return result
