"""The run executor: drives one run's tokens through its flow on the event loop.

Each live token is driven by one asyncio task, placement after placement; a parallel split
gives each new branch a task of its own, so independent branches run at the same time. Waiting
tokens (waits, retry backoffs) and parked tokens have no task at all: their due instants (a
wait, a backoff, a park deadline, escalation timers) are in the store, and the engine's sweeper
hands them back here when they are due; a signal hands a parked token back too.

When a run has only waiting and parked tokens left (a subflow's token whose child waits parked
counts as parked) it is *quiescent*: its lifecycle becomes ``parked`` and the executor lets go
of it: the engine forgets it, and a signal, the sweeper or the end of a subflow's child rebuilds
an executor from the store (:meth:`RunExecutor.restore`).

A parked token is moved by exactly one of {signal, park timeout, interrupting timer, cancel}:
each first claims the token in memory (synchronously, so a second claimant in this process sees
it taken) and then commits with ``Commit.expect`` (status ``parked`` and the park's epoch; for a
signal also "deadline still ahead"), so the store refuses the loser across processes too.

The executor holds its view of the run (:class:`~flowtide.engine.run.view.RunView`), the commit
of a step (through its :class:`~flowtide.engine.run.committer.Committer`) and its tasks. The rest
is parts it holds and calls, each calling back only through a protocol of what it needs: each
token's task (:mod:`~flowtide.engine.run.executor.driver`), its tokens' attempts
(:mod:`~flowtide.engine.run.executor.attempts`), arming (windows, timers, anchors:
:mod:`~flowtide.engine.run.executor.arming`), the router (moves along outputs:
:mod:`~flowtide.engine.run.executor.router`), join groups
(:mod:`~flowtide.engine.run.executor.joins`), task steps (task, wait and terminal placements:
:mod:`~flowtide.engine.run.executor.tasks`), signals (:mod:`~flowtide.engine.run.executor.signals`),
due firings (:mod:`~flowtide.engine.run.executor.firing`), child runs
(:mod:`~flowtide.engine.run.executor.child_runs`), phases
(:mod:`~flowtide.engine.run.executor.phases`), the run's start
(:mod:`~flowtide.engine.run.executor.launching`), settling and letting go
(:mod:`~flowtide.engine.run.executor.settling`) and the run's end
(:mod:`~flowtide.engine.run.executor.ending`). What they decide is decided by the parts of
:mod:`flowtide.engine.run`."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any

from flowtide.engine.errors import StoreUnavailableError, unavailable
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import ErrorData, EventPayload, error_data
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.result import ErrorInfo, InterruptedAt
from flowtide.engine.run.attempts import AttemptRunner, Running
from flowtide.engine.run.coalescing import may_wait
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.child_runs import ChildRuns
from flowtide.engine.run.executor.driver import Driver
from flowtide.engine.run.executor.ending import RunEnding
from flowtide.engine.run.executor.firing import DueFiring
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.executor.launching import RunStart
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.executor.router import Router
from flowtide.engine.run.executor.settling import Settling
from flowtide.engine.run.executor.signals import Signals
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.marks import inherit
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.restoring import restore_view
from flowtide.engine.run.view import RunEnd, RunView
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import CancelReason, CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.background import task_awaiting
from flowtide.store.base import (
    Commit,
    DeadlineAhead,
    DueEntry,
    EventRecord,
    Lease,
    LeaseTake,
    ParkStatus,
    RunRecord,
    RunSnapshot,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
log = logging.getLogger("flowtide.engine")
PARKED_LIFECYCLE = Lifecycle.PARKED.value
LIVE_LIFECYCLES = frozenset(lc.value for lc in Lifecycle if not lc.terminal)
"""What a run's stored lifecycle must be for a step of its executor to commit."""


class RunExecutor:
    """One run, driven from its start or rebuilt from the store: its view, its commits and
    tasks, and the parts that move its tokens."""

    def __init__(
        self,
        host: RunHost,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        *,
        code: FlowCode,
        parent_scope: CancelScope | None = None,
    ) -> None:
        self.host = host
        self.plan = plan
        self.code = code  # (empty in a client: it runs no node code)
        self.flow = plan.flow
        self.view = RunView(run, state)
        """The run's data: record, state, live tokens, parks, anchors, visits, joins, end."""
        self.clock = host.clock
        self.merger = StateMerger(self.flow.reducers, self.code.reducers)
        self.root = CancelScope(parent_scope)
        self.tasks: set[asyncio.Future[Any]] = set()
        """The tasks that drive the run's tokens (and side steps: firings, a scatter's items)."""
        self.running: Running = {}
        self.starting: set[str] = set()
        """Tokens whose attempt start is committed (or being committed) but whose cancel scope
        is not registered in ``running`` yet: an interrupting timer firing then is kept for the
        scope (:func:`~flowtide.engine.run.marks.interrupt`) instead of being lost."""
        self.prestarted: set[str] = set()
        """Tokens whose attempt another step started (a move, a queued start: TaskSteps.start)."""
        self.ids = itertools.count(1)
        self.started = False
        self.closed = False
        self.deadline_timer: Any = None
        self.finalizer: asyncio.Task[None] | None = None
        self.committer = Committer(host)
        """The one way to the store (and what the next commits carry for their tokens)."""
        self.steps = StepLock(self.committer.flush)
        """One step of the run at a time (the steps queued for it are stored together)."""
        self.released = False
        """The engine let go of this executor (quiescent): it must not be used any more."""
        self.arming = Arming(self.view, plan, self.clock, self.starting, self.commit)
        """Windows, timers and node anchors of the run's tokens."""
        self.attempts = AttemptRunner(host, run, self.flow, self.merger, self.running)
        """Runs the run's node code (the attempts of its tokens, phases, scatter items)."""
        self.token_attempts = TokenAttempts(self)
        """What an attempt of a token needs around the runner, and merging what it changed."""
        self.ending = RunEnding(self)
        """The run's end (and the caller's cancel)."""
        self.root.on_cancel(self.ending.on_root_cancelled)
        self.router = Router(self, self.ending)
        """Moves the run's tokens along outputs (see :meth:`move`)."""
        self.joins = Joins(self, self.router)
        """The run's join groups: arrivals, firings, their losers cancelled."""
        self.task_steps = TaskSteps(self)
        """What a token does at a task, wait or terminal placement (attempts, retries, parks)."""
        self.lease: Lease | None = None
        """The lease the run is driven under: every commit carries it (see ``Commit.lease``)."""
        self.taking: Lease | None = None
        """The lease the run's next commit takes, while :attr:`lease` is None: the run was
        rebuilt from a snapshot in which nobody held it, and is taken by the commit that first
        changes it (see ``Commit.take``), not before."""
        self.cancels: list[str] = []
        """The cancel requests the run applied: the commit of its end answers them."""
        self.handed_off = False
        """A token is ready but this engine runs no nodes: the run goes back to the store for a
        worker once the step is done (see ``RunHost.executes``)."""
        self.signals = Signals(self)
        """Signals to the run's parked tokens, and requests recorded for the run."""
        self.due_firing = DueFiring(self)
        """The run's due entries fired (waits, backoffs, park deadlines, timers, requests)."""
        self.children = ChildRuns(self)
        """The run's child runs (a subflow's token, a scatter's flow bodies), and the subflow
        tokens waiting for a child that waits parked."""
        self.phases = Phases(self)
        """The run's pre and post phases."""
        self.run_start = RunStart(self)
        """The run's start and its deadline."""
        self.settler = Settling(self)
        """Settling the run (or handing it back) when nothing drives it any more."""
        self.driver = Driver(self)
        """Each token's task, placement after placement."""

    def restore(self, snapshot: RunSnapshot) -> None:
        """Rebuild in-memory bookkeeping from the run's snapshot (before resuming): its tokens,
        the history after its resume checkpoint, its node anchors and open parks."""
        self.started = True
        restored = restore_view(self.view, self.plan, snapshot.tokens, snapshot.history)
        self.committer.restored(restored.seq)
        self.ids = itertools.count(restored.next_id)
        for anchor in snapshot.anchors:
            self.view.anchors[(anchor.placement, anchor.item)] = anchor.at
        for park in snapshot.parks:
            token = self.view.tokens.get(park.token_id)
            if token is not None and token.status is S.PARKED and token.epoch == park.epoch:
                self.view.parks[park.token_id] = park

    def fire_come(self, due: Sequence[DueEntry], now: datetime) -> int:
        """Fire the run's due entries whose instant has come by ``now`` (its lease is held
        here); how many were not being fired already."""
        come = [e for e in due if e.when <= now]
        fired = 0
        if come and self.settler.pin():
            try:
                fired = self.due_firing.fire_all(come)
            finally:
                self.settler.unpin()
        return fired

    def resume_tokens(self) -> None:
        """Start driving restored tokens (waiting and parked ones have their due entries in the
        store: the sweeper fires them)."""
        for t in list(self.view.tokens.values()):
            if t.status is S.RUNNING and self.plan.placements[t.placement].kind == "subflow":
                # It waits for its child again (its start is not made again: a timer firing
                # first is kept for it, as for any attempt starting).
                self.starting.add(t.id)
                self.spawn(t)
            elif t.status in (S.READY, S.RUNNING):
                t.status = S.READY
                self.spawn(t)
        self.run_start.arm_deadline()

    @property
    def run(self) -> RunRecord:
        """The run's record (see :attr:`view`)."""
        return self.view.run

    def event(
        self,
        token: TokenRecord | None,
        payload: EventPayload,
        *,
        placement: str | None = None,
        attempt: int | None = None,
    ) -> EventRecord:
        """The event ``payload`` of ``token`` (its placement and attempt unless given), now."""
        return event_record(
            payload,
            self.view.run.id,
            self.clock.now(),
            placement=placement if placement is not None else (token.placement if token else None),
            attempt=attempt if attempt is not None else (token.attempt if token else None),
            token_id=token.id if token else None,
        )

    def error_info(self, exc: BaseException, placement: str | None = None) -> ErrorInfo:
        """``exc`` as the run records it: redacted and cut to size (see
        :mod:`flowtide.engine.redaction`)."""
        return ErrorInfo.of(exc, placement, redact=self.host.redact)

    def error_data(self, exc: BaseException) -> ErrorData:
        """``exc`` as an event records it: redacted and cut to size."""
        return error_data(exc, self.host.redact)

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        last: bool = False,
    ) -> bool:
        """Commit one step through the run's :class:`Committer` (the only way to the store);
        False if skipped (the run ended, or ``token`` was cancelled meanwhile).

        ``last``: the step is the last of the calling task (a token parked): if the run is then
        quiescent, the step's commit settles it too, and the run is let go once it is stored
        (see :meth:`Settling.gives_back_with
        <flowtide.engine.run.executor.settling.Settling.gives_back_with>`).

        ``update`` runs under the step lock, once the step is known to go ahead: it applies the
        step's state change in memory and gives what to put on the commit, so that a skipped
        step never touches the run state.
        """
        async with self.steps.hold():
            if unless_ended and (self.view.end is not None or self.closed):
                return False
            if token is not None and token.status is S.CANCELLED:
                return False
            if update is not None:
                # The step's state change, applied in memory and put on the commit.
                written, removed = update()
                if written:
                    c.state = written
                if removed:
                    c.state_deleted = removed
            self.committer.fold(c)
            if c.lease is None and c.take is None:
                if self.lease is not None:
                    c.lease = self.lease
                elif self.taking is not None:
                    c.take = LeaseTake(self.taking, self.clock.now())
            if self.view.run.lifecycle == PARKED_LIFECYCLE and self.view.end is None and c.tokens:
                # Something moves again: the run is running. (Not for a refusal's answer.)
                self.view.run.lifecycle = transition(
                    self.view.run.lifecycle, Lifecycle.RUNNING
                ).value
                if c.run is None:
                    c.run = self.view.run
            if c.run_lifecycles is None:
                c.run_lifecycles = LIVE_LIFECYCLES  # refused if another actor ended the run
            own = self.steps.holder in self.tasks  # (the task holding it: this one)
            if own and self.steps.queued and may_wait(c) and self.committer.may_hold_back(c):
                # Steps are queued: this one's commit goes with theirs (see StepLock).
                self.steps.owe(self.committer.hold_back(c))
                return True
            settles = last and own and self.settler.gives_back_with(c)
            try:
                # A task of this executor is cancelled only by its close (see
                # flowtide.engine.run._commit).
                await self.committer.send(c, shield=not own)
            except BaseException:
                if settles:
                    self.settler.not_given_back()
                raise
            if c.take is not None:
                self.lease = self.lease or c.take.lease  # (held here from now on)
                self.taking = None
            if settles:
                await self.settler.given_back()
        return True

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None:
        """A step could not commit: drop this view of the run, which the store has as it was.
        A conflict: another actor (an engine on the same store) moved the run first, and what
        this view knows is stale. An unavailable store: the run is left for recovery, and who
        waits on it is told."""
        if isinstance(exc, StoreUnavailableError):
            log.error("%s", exc)
            self.host.unavailable(self, exc)
        elif isinstance(exc, DeadlineAhead):
            # This worker's clock runs ahead of the store's: the run is left until the
            # deadline has come there.
            log.warning("%s", exc)
            self.host.defer(self, exc.early_by)
        else:
            self.host.discard(self)

    def new_token(self, placement: str, lineage: tuple[tuple[str, int, int], ...]) -> TokenRecord:
        t = TokenRecord(
            id=f"{self.view.run.id}.{next(self.ids)}",
            run_id=self.view.run.id,
            placement=placement,
            status=S.READY,
            visit=self.next_visit(placement),
            lineage=lineage,
            created_at=self.clock.now(),
        )
        self.view.tokens[t.id] = t
        return t

    def split_tokens(
        self, token: TokenRecord, targets: Sequence[str], split: str
    ) -> list[TokenRecord]:
        """``token`` (done) and the new tokens of its split, one per target."""
        n = len(targets)
        new = [self.new_token(t, (*token.lineage, (split, i, n))) for i, t in enumerate(targets)]
        for t in new:
            inherit(t, token)  # (a reminder's branches stay its own)
        return [token, *new]

    def next_visit(self, placement: str) -> int:
        n = self.view.visits.get(placement, 0) + 1
        self.view.visits[placement] = n
        return n

    def spawn(self, token: TokenRecord) -> None:
        if not self.host.executes:
            # Nodes run on workers: the token is left ready, in the store, for one of them.
            self.handed_off = True
            return
        # (A token moved by a commit held back is driven once that commit is stored.)
        after = self.committer.unsent()
        task = asyncio.get_running_loop().create_task(self.driver.drive(token, after))
        self.tasks.add(task)

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        async def wrapper() -> None:
            try:
                await coro
            except StoreConflict as exc:
                self.lose_view(exc)
            except asyncio.CancelledError:
                if not self.closed:
                    raise
            except Exception as exc:
                if (down := unavailable(self.view.run.id, exc)) is not None:
                    self.lose_view(down)
                else:
                    self.request_end(Lifecycle.FAILED, [self.error_info(exc)])

        self.track(task_awaiting(wrapper(), coro))

    def working(self, besides: asyncio.Future[Any] | None = None) -> bool:
        """Whether a task of the run is at work (not only waiting for a parked child run), but
        ``besides``."""
        if not self.children.waits:
            return any(t is not besides for t in self.tasks)
        waiting = self.children.waiting_tasks()
        return any(t not in waiting and t is not besides for t in self.tasks)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Hold ``task`` among the run's tasks until it is done; the run may then be drained
        (settled or ended), as when a token's task ends."""
        self.tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self.tasks.discard(t)
            self.settler.maybe_drained()

        task.add_done_callback(done)

    def request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None:
        if self.view.end is not None or self.closed:
            return
        self.view.end = RunEnd(lifecycle, list(errors), interrupted)
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        if cancel_reason is not None:
            self.root.cancel(cancel_reason, self.clock.now())
        self.finalizer = asyncio.get_running_loop().create_task(self.ending.finalize())

    def fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None:
        token.status = S.FAILED
        self.view.tokens.pop(token.id, None)
        self.request_end(Lifecycle.FAILED, [self.error_info(exc, token.placement)], interrupted)

    def close(self, notify: bool = True) -> None:
        """Stop driving this run without recording anything (the engine is closing)."""
        self.closed = True
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        for task in list(self.tasks):
            task.cancel()
        if self.finalizer is not None:
            self.finalizer.cancel()

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None:
        park = self.view.parks.pop(token.id, None)
        if park is None:
            return
        park.status = status
        park.closed_at = self.clock.now()
        park.closed_by = by
        self.view.recent_parks[park.id] = park
        self.committer.closing_parks.append(park)

    async def move(self, m: Move) -> Moved:
        """Move a token along an output (see :meth:`Router.move
        <flowtide.engine.run.executor.router.Router.move>`) and fire the join groups the move
        made ready: one step, under the step lock."""
        async with self.steps.hold():
            moved = await self.router.move(m)
            if moved.joins_due:
                await self.joins.evaluate()
        return moved
