"""Settling a run: when nothing drives it any more, it ends (completed, or failed if a token is
stuck), or it is quiescent (only waits and parks left) and given back to the store (lifecycle
``parked``), or handed back for a worker when this engine runs no nodes; pins keep it held
while a signal or a firing works on it. A part the executor holds (:class:`Settling`), calling
back only through :class:`SettlingHost`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from flowtide.engine.errors import DrainedWithoutTerminal, StoreUnavailableError
from flowtide.engine.events import EventKind
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.result import ParkedToken, RunResult
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import DEADLINE
from flowtide.engine.run.executor.child_runs import ChildWaits
from flowtide.engine.run.executor.ports import EndPort, StepPort
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.worker._host import RunHost
from flowtide.store.base import Checkpoint, Commit, Lease, StoreConflict, StoreError, TokenStatus

S = TokenStatus


class SettlingHost(StepPort, EndPort, Protocol):
    """What settling needs of the executor besides a step: the engine, the step lock, the
    committer, the run's tasks and child waits, its lease (or the one it takes) and timers,
    whether it started, is handed off or let go, and how it ends, closes or drops its view."""

    released: bool
    lease: Lease | None
    taking: Lease | None
    deadline_timer: Any

    @property
    def host(self) -> RunHost: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def committer(self) -> Committer: ...

    @property
    def children(self) -> ChildWaits: ...

    @property
    def tasks(self) -> set[asyncio.Future[Any]]: ...

    @property
    def started(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    @property
    def handed_off(self) -> bool: ...

    def working(self, besides: asyncio.Future[Any] | None = None) -> bool: ...

    def close(self, notify: bool = True) -> None: ...

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None: ...


class Settling:
    """Settles the run, or hands it back, when nothing drives it any more, through ``ex``."""

    def __init__(self, ex: SettlingHost) -> None:
        self.ex = ex
        self.pins = 0
        """Signals and firings working on the run: it is not let go meanwhile (see :meth:`pin`)."""
        self.settling: asyncio.Task[None] | None = None
        """The task that settles the run (see :meth:`settle`)."""
        self.handing: asyncio.Task[None] | None = None
        """The task that hands the run back (see :meth:`hand_off`)."""
        self.before: tuple[str, Checkpoint | None] = ("", None)
        """The run's lifecycle and checkpoint before a step settled it (see
        :meth:`gives_back_with`)."""

    def maybe_drained(self) -> None:
        if (
            self.ex.view.end is not None
            or self.ex.closed
            or self.ex.working()
            or not self.ex.started
        ):
            return
        if self.ex.released:
            return
        if self.pins:
            return
        if self.ex.handed_off:
            if self.handing is None:
                self.handing = asyncio.get_running_loop().create_task(self.hand_off())
            return
        if self.ex.children.waits or any(
            t.status in (S.WAITING, S.PARKED) for t in self.ex.view.tokens.values()
        ):
            settling = self.settling is not None and not self.settling.done()
            if not settling and self.quiescent():
                self.settling = asyncio.get_running_loop().create_task(self.settle())
            return
        if self.ex.view.tokens:
            stuck = sorted({t.placement for t in self.ex.view.tokens.values()})
            self.ex.request_end(
                Lifecycle.FAILED, [self.ex.error_info(DrainedWithoutTerminal(stuck))]
            )
        elif self.ex.view.terminals:
            self.ex.request_end(Lifecycle.COMPLETED)
        else:
            self.ex.request_end(
                Lifecycle.FAILED,
                [self.ex.error_info(DrainedWithoutTerminal(self.ex.view.last_placements))],
            )

    def quiescent(self, besides: asyncio.Future[Any] | None = None) -> bool:
        """Only waiting/parked (and join-arrived) tokens are left, and nothing runs (but the
        task ``besides``, if given: about to end)."""
        if self.ex.view.end is not None or self.ex.closed or self.ex.working(besides) or self.pins:
            return False
        # (A subflow token whose child waits parked counts as parked.)
        statuses = {
            t.status for t in self.ex.view.tokens.values() if t.id not in self.ex.children.waits
        }
        if self.ex.children.waits:
            statuses.add(S.PARKED)
        return bool(statuses & {S.WAITING, S.PARKED}) and not statuses & {S.READY, S.RUNNING}

    def parked_now(self) -> RunResult | None:
        """The run as it is, if it waits parked now (settled, nothing at work); else None."""
        if self.ex.view.run.lifecycle != Lifecycle.PARKED.value or not self.quiescent():
            return None
        result = self.snapshot()
        return result if result.parked else None

    def parked_tokens(self) -> tuple[ParkedToken, ...]:
        out = []
        for t in self.ex.view.tokens.values():
            park = self.ex.view.parks.get(t.id)
            if t.status is S.PARKED and park is not None:
                out.append(
                    ParkedToken(
                        t.id, t.placement, park.key, t.deadline, park.payload, park.parked_at
                    )
                )
        out.extend(self.ex.children.parked())
        return tuple(out)

    def snapshot(self) -> RunResult:
        """The run as it is now (lifecycle ``parked`` at a quiescent point)."""
        return RunResult(
            run_id=self.ex.view.run.id,
            lifecycle=Lifecycle(self.ex.view.run.lifecycle),
            outcome=None,
            state=dict(self.ex.view.state),
            parked=self.parked_tokens(),
            warnings=tuple(self.ex.view.warnings),
            terminals=tuple(self.ex.view.terminals),
        )

    async def settle(self) -> None:
        """The run is quiescent: lifecycle ``parked``, tell who waits, and let go of it."""
        await asyncio.sleep(0)
        async with self.ex.steps.hold():
            if not self.quiescent():
                return
            if self.untouched():
                result = self.snapshot()
                self._let_go()
            elif not await self._give_back():
                return
            else:
                result = self.snapshot()
        self.ex.host.settled(result)

    def untouched(self) -> bool:
        """Whether the run is parked in the store as this executor found it: rebuilt from a
        snapshot in which nobody held it, it has committed nothing (its lease was never taken),
        so there is nothing to write to let go of it."""
        parked = self.ex.view.run.lifecycle == Lifecycle.PARKED.value
        return parked and self.ex.lease is None and self.ex.taking is not None

    async def _give_back(self) -> bool:
        """Commit the run's lifecycle ``parked`` and give it back, then let go of it; False if
        it was not let go (something came meanwhile, or the commit was refused)."""
        c = Commit(self.ex.view.run.id)
        self._put_give_back(c, 0)
        try:
            await self.ex.commit(c)
        except (StoreConflict, StoreUnavailableError) as exc:
            # Another worker took the run, or the store stays down: the run is as the
            # store has it.
            self.ex.lose_view(exc)
            return False
        return await self._given_back(None)

    def gives_back_with(self, c: Commit) -> bool:
        """Whether ``c`` (folded, not sent), the last step of the calling task, leaves the run
        quiescent, nothing else at work or held back: then ``c`` settles the run too (what the
        commit :meth:`settle` would make after it is put on it: one commit fewer), and the
        caller calls :meth:`given_back` once it is stored, :meth:`not_given_back` if not."""
        ex = self.ex
        if (
            ex.released
            or not ex.started
            or ex.handed_off
            or ex.lease is None
            or ex.steps.queued
            or ex.committer.held is not None
            or (self.settling is not None and not self.settling.done())
            or any(e.kind == EventKind.TERMINAL_REACHED for e in c.events)
            or not self.quiescent(asyncio.current_task())
        ):
            return False
        self.before = (ex.view.run.lifecycle, ex.view.run.checkpoint)
        self._put_give_back(c, len(c.events))
        return True

    def not_given_back(self) -> None:
        """The commit :meth:`gives_back_with` settled the run with was not stored: the run's
        record is as it was before."""
        self.ex.view.run.lifecycle, self.ex.view.run.checkpoint = self.before

    async def given_back(self) -> None:
        """The commit :meth:`gives_back_with` settled the run with is stored: let go of the
        run, as :meth:`settle` does, once the calling task has ended."""
        if await self._given_back(asyncio.current_task()):
            self.ex.host.settled(self.snapshot())

    def _put_give_back(self, c: Commit, events: int) -> None:
        """Put on ``c`` the run's lifecycle ``parked``, its resume checkpoint (after ``c``'s
        own ``events``) and the lease given back."""
        if self.ex.view.run.lifecycle != Lifecycle.PARKED.value:
            self.ex.view.run.lifecycle = transition(
                self.ex.view.run.lifecycle, Lifecycle.PARKED
            ).value
        if self.ex.view.run.deadline is not None:
            # Nothing holds the run's deadline timer any more: the sweeper will.
            entry = DEADLINE.entry(
                self.ex.view.run.deadline, self.ex.view.run.id, self.ex.view.run.id
            )
            c.due = [*c.due, entry]
        # What a rebuild needs beyond the tokens, so that it reads no older history. (Only the
        # run's lease holder writes its history: the events of ``c`` follow the last stored.)
        self.ex.view.run.checkpoint = Checkpoint(
            self.ex.committer.last_seq() + events,
            dict(self.ex.view.visits),
            list(self.ex.view.terminals),
            self.ex.view.outcome,
        )
        c.run = self.ex.view.run
        c.release = True  # nobody holds it now: its wake instant is its next due entry

    async def _given_back(self, besides: asyncio.Future[Any] | None) -> bool:
        """The run was given back: let go of it (True), or, if something came meanwhile, take
        its lease again (else its view is dropped)."""
        if not self.quiescent(besides):
            if not self.ex.closed:
                await self._take_back()
            return False
        self._let_go()
        return True

    def _let_go(self) -> None:
        """Nothing of the run stays in memory (it is parked in the store, nobody holding it)."""
        self.ex.released = True
        if self.ex.deadline_timer is not None:
            self.ex.deadline_timer.cancel()
            self.ex.deadline_timer = None
        self.ex.root.close()
        if self.ex.children.waits:
            # Its subflows' tokens stay running in the store, each waiting for its child,
            # whose end wakes this run (see flowtide.engine.run.children): their tasks go.
            self.ex.close()
        self.ex.host.let_go(self.ex)

    async def _take_back(self) -> None:
        """Something came (a cancel, a firing) while the commit that gave the run back was under
        way: its lease is taken again, for what follows to be committed (else this view is
        dropped)."""
        lease, now = self.ex.lease, self.ex.clock.now()
        taken = None
        if lease is not None:
            with contextlib.suppress(StoreError):
                taken = await self.ex.host.store.acquire_run(
                    self.ex.view.run.id, lease.owner, now, max(lease.expires, now)
                )
        if taken is None:
            self.ex.host.discard(self.ex)
            return
        self.ex.lease = taken

    async def hand_off(self) -> None:
        """This engine runs no nodes, and a token is ready: give the run back to the store (it
        needs a worker at once) and let go of it."""
        await asyncio.sleep(0)
        async with self.ex.steps.hold():
            if (
                self.ex.view.end is not None
                or self.ex.closed
                or self.ex.released
                or self.ex.tasks
                or self.pins
            ):
                return
            self.ex.view.run.checkpoint = Checkpoint(
                self.ex.committer.last_seq(),
                dict(self.ex.view.visits),
                list(self.ex.view.terminals),
                self.ex.view.outcome,
            )
            try:
                await self.ex.commit(
                    Commit(self.ex.view.run.id, run=self.ex.view.run, release=True)
                )
            except (StoreConflict, StoreUnavailableError) as exc:
                self.ex.lose_view(exc)
                return
            self.ex.released = True
            if self.ex.deadline_timer is not None:
                self.ex.deadline_timer.cancel()
                self.ex.deadline_timer = None
            self.ex.root.close()
            self.ex.host.let_go(self.ex)
        self.ex.host.settled(self.snapshot())

    def pin(self) -> bool:
        """Keep the executor from being let go while a signal or a firing works on it; False if
        it has already been let go (rebuild one from the store)."""
        if self.ex.released or self.ex.closed:
            return False
        self.pins += 1
        return True

    def unpin(self) -> None:
        self.pins -= 1
        self.maybe_drained()
