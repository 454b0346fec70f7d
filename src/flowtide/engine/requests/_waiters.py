"""Who waits on a run: callers of ``wait`` (its end) and of ``run``/``wait_parked`` (its next
quiescent point with a parked token, or its end), answered from the executor or the store.

While the run is held here its executor answers, and nothing looks at the store; once it is
let go of without ending (parked, or driven elsewhere now), the store is watched for it. The
results of the runs that ended lately in this process are kept (the last
:data:`RECENT_ENDS`): a caller who comes after the end is answered without a read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from datetime import timedelta

from flowtide.clock import Clock
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ParkedToken, RunResult
from flowtide.engine.run.children import open_parks
from flowtide.store.base import RunRecord, Store, StoreError

_Futures = defaultdict[str, list[asyncio.Future[RunResult]]]

RECENT_ENDS = 256
"""How many results of runs that ended in this process are kept, the latest."""


class RunWaiters:
    def __init__(self) -> None:
        self._ends: _Futures = defaultdict(list)
        self._settles: _Futures = defaultdict(list)
        self._recent: OrderedDict[str, RunResult] = OrderedDict()
        """The results of the runs that ended lately here (a run's end never changes)."""
        self._on_let_go: defaultdict[str, list[Callable[[], None]]] = defaultdict(list)
        """Run id -> what starts watching the store for a waiter, once the run is let go."""

    def end(self, run_id: str) -> asyncio.Future[RunResult]:
        """A future of the run's end."""
        return self._add(self._ends, run_id)

    def settle(self, run_id: str) -> asyncio.Future[RunResult]:
        """A future of the run's next quiescent point with a parked token, or its end."""
        return self._add(self._settles, run_id)

    def waiting(self, run_id: str) -> bool:
        return bool(self._ends.get(run_id) or self._settles.get(run_id))

    def settled(self, result: RunResult) -> None:
        """The run reached a quiescent point: those waiting for a park learn it if it has one."""
        if result.parked:
            _resolve(self._settles, result.run_id, result)

    def ended(self, result: RunResult) -> None:
        self._recent[result.run_id] = result
        self._recent.move_to_end(result.run_id)
        if len(self._recent) > RECENT_ENDS:
            self._recent.popitem(last=False)
        _resolve(self._settles, result.run_id, result)
        _resolve(self._ends, result.run_id, result)

    def let_go(self, run_id: str) -> None:
        """This engine no longer holds the run, which has not ended here: its waiters watch
        the store from now on (from the next turn of the loop: a run let go of parked tells
        those waiting for its park right after, and they need no watch)."""
        starts = self._on_let_go.pop(run_id, None)
        if starts:
            loop = asyncio.get_running_loop()
            for start in starts:
                loop.call_soon(start)

    def fail(self, run_id: str, error: Exception) -> None:
        """Every waiter of the run gets ``error``."""
        for futures in (self._ends, self._settles):
            for fut in futures.pop(run_id, ()):
                if not fut.done():
                    fut.set_exception(error)
                    fut.exception()  # retrieved: nobody may be waiting any more

    def fail_all(self, error: Callable[[str], Exception]) -> None:
        """Every waiter of every run gets ``error(run_id)`` (the engine is closing)."""
        for run_id in {*self._ends, *self._settles}:
            self.fail(run_id, error(run_id))

    async def from_store(self, store: Store, run_id: str, *, parked: bool = False) -> None:
        """Answer the run's waiters from the store if it has ended (``parked``: also those
        waiting for a park, if the run waits parked with nothing of it in memory). A run that
        ended lately here is answered without a read."""
        known = self._recent.get(run_id)
        if known is not None:
            self.ended(known)
            return
        run = await store.get_run(run_id)
        if Lifecycle(run.lifecycle).terminal:
            self.ended(await stored_result(store, run))
        elif parked and run.lifecycle == Lifecycle.PARKED:
            # (Its own parks, and those of the subflow children its tokens wait for.)
            parks = await open_parks(store, run_id)
            if parks:
                tokens = (
                    ParkedToken(
                        p.token_id,
                        p.placement,
                        p.key,
                        p.deadline,
                        p.payload,
                        p.parked_at,
                        p.run_id if p.run_id != run_id else None,
                    )
                    for p in parks
                )
                state = await store.get_state(run_id)
                result = RunResult(
                    run_id=run.id,
                    lifecycle=Lifecycle.PARKED,
                    outcome=None,
                    state=state,
                    parked=tuple(tokens),
                )
                _resolve(self._settles, run_id, result)

    async def answer(
        self,
        fut: asyncio.Future[RunResult],
        run_id: str,
        store: Store,
        held: Callable[[], bool],
        clock: Clock,
        poll: float,
        *,
        parked: bool,
    ) -> RunResult:
        """``fut``'s result. While the run is ``held()`` here its executor answers; else
        (another worker drives it, or nobody) the store is looked at whenever it may have
        changed, and at least every ``poll`` seconds on ``clock``, to answer ``fut`` from it."""
        watch: asyncio.Future[None] | None = None
        answered = False

        def start() -> None:
            nonlocal watch
            if not answered and not fut.done() and (watch is None or watch.done()):
                watch = asyncio.ensure_future(watching())

        async def watching() -> None:
            await self._watch(fut, run_id, store, held, clock, timedelta(seconds=poll), parked)
            if not fut.done():
                self._on_let_go[run_id].append(start)  # (held here again: until let go of)

        if held():
            self._on_let_go[run_id].append(start)
        else:
            start()
        try:
            return await asyncio.shield(fut)
        finally:
            answered = True  # (the caller has gone: nothing more to start)
            if watch is not None:
                watch.cancel()
            waiting = self._on_let_go.get(run_id)
            if waiting is not None:
                while start in waiting:
                    waiting.remove(start)
                if not waiting:
                    del self._on_let_go[run_id]

    async def _watch(
        self,
        fut: asyncio.Future[RunResult],
        run_id: str,
        store: Store,
        held: Callable[[], bool],
        clock: Clock,
        poll: timedelta,
        parked: bool,
    ) -> None:
        """Answer ``fut`` from the store until it is answered, or the run is held here (then
        its executor answers: the watch ends, started again once the run is let go of)."""
        while not fut.done() and not held():
            try:
                await _changed_within(store, clock, poll)
            except StoreError:  # (down for now: look again after a while, not at once)
                await clock.sleep(poll)
                continue
            if not held() and not fut.done():
                with contextlib.suppress(StoreError):  # (down for now: look again)
                    await self.from_store(store, run_id, parked=parked)

    @staticmethod
    def _add(futures: _Futures, run_id: str) -> asyncio.Future[RunResult]:
        fut: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        futures[run_id].append(fut)
        return fut


async def stored_result(store: Store, run: RunRecord) -> RunResult:
    """The result of an ended run, as the store keeps it."""
    if run.result:
        return RunResult.from_dict(run.result)
    return RunResult(
        run_id=run.id,
        lifecycle=Lifecycle(run.lifecycle),
        outcome=run.outcome,
        state=await store.get_state(run.id),
    )


async def _changed_within(store: Store, clock: Clock, poll: timedelta) -> None:
    """Return once the store may have changed (another process's notice), or ``poll`` has
    passed on ``clock``, whichever comes first (a store's error is raised)."""
    changed = asyncio.ensure_future(store.wait_changed(poll.total_seconds()))
    due = asyncio.ensure_future(clock.sleep(poll))
    try:
        await asyncio.wait((changed, due), return_when=asyncio.FIRST_COMPLETED)
    finally:
        changed.cancel()
        due.cancel()
    if changed.done() and not changed.cancelled():
        changed.result()


def _resolve(futures: _Futures, run_id: str, result: RunResult) -> None:
    for fut in futures.pop(run_id, ()):
        if not fut.done():
            fut.set_result(result)


__all__ = ["RunWaiters", "stored_result"]
