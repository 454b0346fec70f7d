"""The runs an engine holds: their executors in memory, their leases kept renewed, and what the
engine does when an executor tells it its run is let go, has ended, is stale or must wait.

A run held here is driven here; letting go of it (quiescent, ended, stale, set aside) drops its
executor, and makes room for the sweeper to take another run when the engine has a limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from flowtide.clock import Clock
from flowtide.engine.flows.contracts import OutputContracts
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import RunResult
from flowtide.engine.run.executor.core import RunExecutor
from flowtide.engine.worker.background import consumed
from flowtide.engine.worker.hosting import Bookkeeping, StartChild
from flowtide.engine.worker.leases import LeaseRenewer, give_back
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.store.base import EventRecord, Lease, RunRecord, Store

GIVE_BACK_AGAIN = timedelta(seconds=1)
"""The wait before a run let go is given back again, while the store does not answer."""

__all__ = ["Deferring", "HeldPresence", "HeldRuns", "HoldingEngine", "RunWaiting", "Waking"]


class HoldingEngine(Protocol):
    """What :class:`HeldRuns` reads of its engine (read when asked: a test may give an engine
    another clock)."""

    store: Store
    clock: Clock
    owner: str
    lease_ttl: timedelta
    max_runs: int | None


class Deferring(Protocol):
    """Where a run is set aside (:class:`~flowtide.engine.worker.leases.SetAside`)."""

    async def defer(self, run_id: str, delay: timedelta) -> None: ...


class HeldPresence(Protocol):
    """What :class:`HeldRuns` tells the engine's presence
    (:class:`~flowtide.engine.worker.presence.Presence`)."""

    @property
    def changed(self) -> asyncio.Event:
        """Set each time a held run settles or is let go of."""

    @property
    def aside(self) -> Deferring: ...

    def let_go(self, run: RunRecord) -> None: ...
    def ended(self, run: RunRecord) -> None: ...
    def gave_back(self, run_ids: Iterable[str], why: str) -> None: ...


class Waking(Protocol):
    """The engine's sweeper, as :class:`HeldRuns` wakes it."""

    def wake(self, when: datetime | None = None) -> None: ...


class RunWaiting(Protocol):
    """Who waits on the engine's runs, as :class:`HeldRuns` tells them."""

    def waiting(self, run_id: str) -> bool: ...
    def settled(self, result: RunResult) -> None: ...
    def fail(self, run_id: str, error: Exception) -> None: ...
    def let_go(self, run_id: str) -> None: ...
    async def from_store(self, store: Store, run_id: str, *, parked: bool = False) -> None: ...


class HeldRuns:
    """The executors of the runs ``engine`` holds (``runs``: run id -> executor), kept renewed
    while any is held. ``sweeper``: the engine's sweeper, if it has one now (woken when room is
    made or a run is given back)."""

    def __init__(
        self,
        engine: HoldingEngine,
        presence: HeldPresence,
        waiters: RunWaiting,
        sweeper: Callable[[], Waking | None],
    ) -> None:
        self._engine = engine
        self._presence = presence
        self._waiters = waiters
        self._sweeper = sweeper
        self.runs: dict[str, RunExecutor] = {}
        self._giving_back: set[asyncio.Task[None]] = set()
        """Runs let go while the store did not answer, given back once it does."""
        self.renewer = LeaseRenewer(
            engine.store,
            engine.clock,
            engine.owner,
            engine.lease_ttl,
            lambda: self.runs,
            self.discard,
        )

    def hold(self, run_id: str, ex: RunExecutor) -> None:
        """Hold the run's executor (and keep its lease renewed while any is held)."""
        self.runs[run_id] = ex
        self.renewer.start()

    def close(self) -> None:
        """Drop every executor held (their runs stay in the store as they are) and stop
        renewing."""
        for ex in list(self.runs.values()):
            ex.close()
        self.runs.clear()
        self.renewer.close()
        for task in self._giving_back:  # (their leases expire, no longer renewed)
            task.cancel()

    def bookkeeping(
        self,
        *,
        thread_slots: ThreadSlots,
        output_contracts: OutputContracts | None,
        publish: Callable[[Sequence[EventRecord]], None],
        start_child: StartChild,
        ended: Callable[[RunResult], None],
    ) -> Bookkeeping:
        """What the engine does when one of its executors tells it something: these held runs'
        part, with the engine's own (``publish`` events, ``start_child``, tell who waits that a
        run ``ended``)."""
        return Bookkeeping(
            thread_slots=thread_slots,
            output_contracts=output_contracts,
            wake_sweeper=self.wake_sweeper,
            publish=publish,
            start_child=start_child,
            let_go=self.let_go,
            discard=self.discard,
            defer=self.defer,
            forget=self.forget_ended,
            unavailable=self.unavailable,
            settled=self.settled,
            ended=ended,
        )

    def at_work(self) -> int:
        return sum(ex.run.lifecycle != Lifecycle.PARKED for ex in self.runs.values())

    def forget(self, ex: object) -> None:
        """This engine stops holding the run of ``ex``, which has not ended here: who waits on
        it watches the store from now on."""
        for run_id in self._drop(ex):
            self._waiters.let_go(run_id)

    def _drop(self, ex: object) -> list[str]:
        """Drop the executor ``ex``; the ids it was held under."""
        dropped = [run_id for run_id, held in self.runs.items() if held is ex]
        for run_id in dropped:
            del self.runs[run_id]
        self._presence.changed.set()
        if self._engine.max_runs is not None:
            self.wake_sweeper()  # (room for another run)
        return dropped

    def let_go(self, ex: object) -> None:
        """The run is quiescent: nothing of it stays in memory."""
        if isinstance(ex, RunExecutor):
            self._presence.let_go(ex.run)
        self.forget(ex)

    def forget_ended(self, ex: object) -> None:
        """The run has ended: this engine stops holding it."""
        if isinstance(ex, RunExecutor) and self.runs.get(ex.run.id) is ex:
            self._presence.ended(ex.run)
        self._drop(ex)  # (who waits on it is told of its end)

    def settled(self, result: RunResult) -> None:
        self._waiters.settled(result)
        self._presence.changed.set()
        if self._engine.max_runs is not None:
            self.wake_sweeper()  # (a run held parked takes no room)

    def unavailable(self, ex: object, error: Exception) -> None:
        """The store kept failing under this executor: drop it and tell who waits on its run."""
        self.discard(ex)
        if isinstance(ex, RunExecutor):
            self._waiters.fail(ex.run.id, error)

    def discard(self, ex: object) -> None:
        """What this executor knows is stale (another process moved the run): drop it. If its
        lease is still this engine's, the run is given back, for a fresh view to go on with."""
        self.forget(ex)
        if isinstance(ex, RunExecutor):
            ex.close(notify=False)
            run_id = ex.run.id
            if ex.lease is not None and ex.lease.owner == self._engine.owner:
                self._presence.gave_back([run_id], "out of date here")
                task = asyncio.get_running_loop().create_task(self.give_back(ex.lease))
                self._giving_back.add(task)
                task.add_done_callback(self._giving_back.discard)
                task.add_done_callback(consumed)
            if self._waiters.waiting(run_id):
                # Whoever waits here learns the run's end from the store, if another actor
                # has ended it.
                task = asyncio.get_running_loop().create_task(
                    self._waiters.from_store(self._engine.store, run_id)
                )
                task.add_done_callback(consumed)

    def defer(self, ex: object, delay: timedelta) -> None:
        """Drop this executor; nobody takes its run for ``delay`` (a deadline not come yet)."""
        self.forget(ex)
        if isinstance(ex, RunExecutor):
            ex.close(notify=False)
            task = asyncio.get_running_loop().create_task(
                self._presence.aside.defer(ex.run.id, delay)
            )
            task.add_done_callback(consumed)

    async def give_back(self, lease: Lease) -> None:
        """Give the run of ``lease`` back, untouched; while the store does not answer, again
        until the lease has expired. This engine renews only the leases of the runs it holds
        (:class:`~flowtide.engine.worker.leases.LeaseRenewer`), not this one, even while the
        store answers now and then: once it has expired, another worker takes the run over."""
        e = self._engine
        while not await give_back(e.store, e.clock, lease):
            if e.clock.now() >= lease.expires:
                return
            await e.clock.sleep(GIVE_BACK_AGAIN)
        self.wake_sweeper()

    def wake_sweeper(self, when: datetime | None = None) -> None:
        sweeper = self._sweeper()
        if sweeper is not None:  # (none in a client, or once closed)
            sweeper.wake(when)
