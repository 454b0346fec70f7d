"""The executor's core: its view of the run (:class:`~flowtide.engine.run.view.RunView`), the
commit of a step (through its :class:`~flowtide.engine.run.committer.Committer`), and its tasks.

Most of the executor is parts the core holds, each calling back only through what it is given:
its tokens' attempts (what the :class:`~flowtide.engine.run.attempts.AttemptRunner` needs around
an attempt: :mod:`~flowtide.engine.run.executor.attempts`), its arming (windows, timers,
anchors: :mod:`~flowtide.engine.run.executor.arming`), its router (moves along outputs:
:mod:`~flowtide.engine.run.executor.router`), its join groups
(:mod:`~flowtide.engine.run.executor.joins`) and its task steps (task, wait and terminal
placements: :mod:`~flowtide.engine.run.executor.tasks`), its signals
(:mod:`~flowtide.engine.run.executor.signals`) and its due firings
(:mod:`~flowtide.engine.run.executor.firing`). The executor over it
(:mod:`~flowtide.engine.run.executor.executor`) holds the rest: child runs, phases, the run's
start, settling and end. What they decide is decided by the parts of :mod:`flowtide.engine.run`;
what the core needs from the executor over it is declared here, abstract."""

from __future__ import annotations

import asyncio
import itertools
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import ErrorData, EventPayload, error_data
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken
from flowtide.engine.run.attempts import AttemptRunner, Running
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.closing import RunClosing
from flowtide.engine.run.executor.firing import DueFiring
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.executor.router import Router
from flowtide.engine.run.executor.signals import Signals
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.marks import inherit
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.parking import park_record
from flowtide.engine.run.view import RunEnd, RunView
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import Cancellation, CancelReason, CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.background import task_awaiting
from flowtide.model.placements import Terminal
from flowtide.store.base import (
    Commit,
    DeadlineAhead,
    DueEntry,
    EventRecord,
    Lease,
    LeaseTake,
    ParkRecord,
    ParkStatus,
    RunRecord,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
log = logging.getLogger("flowtide.engine")
PARKED_LIFECYCLE = Lifecycle.PARKED.value
LIVE_LIFECYCLES = frozenset(lc.value for lc in Lifecycle if not lc.terminal)
"""What a run's stored lifecycle must be for a step of its executor to commit."""


@dataclass(frozen=True, slots=True)
class ChildWait:
    """A subflow token's task, waiting for a child run that waits parked, and the child's
    parked tokens (each with the run it is in). The run counts that token as parked: it may
    settle and be let go, that task with it (the child's end wakes it from the store)."""

    task: asyncio.Future[Any] | None
    parked: tuple[ParkedToken, ...]


class RunCore(ABC):
    """One run's view and commits, and the parts that move its tokens; the executor over it
    drives them."""

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
        self.root.on_cancel(self.on_root_cancelled)
        self.tasks: set[asyncio.Future[Any]] = set()
        """The tasks that drive the run's tokens (and side steps: firings, a scatter's items)."""
        self.child_waits: dict[str, ChildWait] = {}  # by subflow token id: see ChildWait
        self.running: Running = {}
        self.starting: set[str] = set()
        """Tokens whose attempt start is committed (or being committed) but whose cancel scope
        is not registered in ``running`` yet: an interrupting timer firing then is kept for the
        scope (:func:`~flowtide.engine.run.marks.interrupt`) instead of being lost."""
        self.prestarted: set[str] = set()
        """Tokens whose move to a task also started its attempt (in the same commit)."""
        self.ids, self.steps = itertools.count(1), StepLock()
        self.started = False
        self.closed = False
        self.deadline_timer: Any = None
        self.finalizer: asyncio.Task[None] | None = None
        self.settling: asyncio.Task[None] | None = None
        self.pins = 0
        self.committer = Committer(host)
        """The one way to the store (and what the next commits carry for their tokens)."""
        self.released = False
        """The engine let go of this executor (quiescent): it must not be used any more."""
        self.arming = Arming(self.view, plan, self.clock, self.starting, self.commit)
        """Windows, timers and node anchors of the run's tokens."""
        self.attempts = AttemptRunner(host, run, self.flow, self.merger, self.running)
        """Runs the run's node code (the attempts of its tokens, phases, scatter items)."""
        self.token_attempts = TokenAttempts(self)
        """What an attempt of a token needs around the runner, and merging what it changed."""
        self.router = Router(self)
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
        self.firing: set[DueEntry] = set()
        """Due entries being fired (not fired twice if the run is claimed again meanwhile)."""
        self.handed_off = False
        """A token is ready but this engine runs no nodes: the run goes back to the store for a
        worker once the step is done (see ``RunHost.executes``)."""
        self.handing: asyncio.Task[None] | None = None
        """The step that hands the run back (see ``handed_off``)."""
        self.signals = Signals(self)
        """Signals to the run's parked tokens, and requests recorded for the run."""
        self.due_firing = DueFiring(self)
        """The run's due entries fired (waits, backoffs, park deadlines, timers, requests)."""

    @property
    def run(self) -> RunRecord:
        """The run's record (see :attr:`view`)."""
        return self.view.run

    @property
    def tokens(self) -> dict[str, TokenRecord]:
        """The run's live tokens by id (see :attr:`view`)."""
        return self.view.tokens

    @property
    def run_id(self) -> str:
        return self.view.run.id

    @property
    def ended(self) -> bool:
        return self.view.end is not None

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
    ) -> bool:
        """Commit one step through the run's :class:`Committer` (the only way to the store);
        False if skipped (the run ended, or ``token`` was cancelled meanwhile).

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
            # A task of this executor is cancelled only by its close (see
            # flowtide.engine.run._commit).
            await self.committer.send(c, shield=asyncio.current_task() not in self.tasks)
            if c.take is not None:
                self.lease = self.lease or c.take.lease  # (held here from now on)
                self.taking = None
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
        task = asyncio.get_running_loop().create_task(self.drive(token))
        self.tasks.add(task)

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        async def wrapper() -> None:
            try:
                await coro
            except (StoreConflict, StoreUnavailableError) as exc:
                self.lose_view(exc)
            except asyncio.CancelledError:
                if not self.closed:
                    raise
            except Exception as exc:
                self.request_end(Lifecycle.FAILED, [self.error_info(exc)])

        self.track(task_awaiting(wrapper(), coro))

    def working(self) -> bool:
        """Whether a task of the run is at work (not only waiting for a parked child run)."""
        if not self.child_waits:
            return bool(self.tasks)
        waiting = {w.task for w in self.child_waits.values()}
        return any(t not in waiting for t in self.tasks)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Hold ``task`` among the run's tasks until it is done; the run may then be drained
        (settled or ended), as when a token's task ends."""
        self.tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self.tasks.discard(t)
            self.maybe_drained()

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
        self.finalizer = asyncio.get_running_loop().create_task(self.finalize())

    def fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None:
        token.status = S.FAILED
        self.view.tokens.pop(token.id, None)
        self.request_end(Lifecycle.FAILED, [self.error_info(exc, token.placement)], interrupted)

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None:
        park = self.view.parks.pop(token.id, None)
        if park is None:
            return
        park.status = status
        park.closed_at = self.clock.now()
        park.closed_by = by
        self.view.recent_parks[park.id] = park
        self.committer.closing_parks.append(park)

    def park_record(self, park_id: str) -> ParkRecord | None:
        """The park as this executor knows it (open, or closed by it), else None."""
        return park_record(self.view.parks, self.view.recent_parks, park_id)

    async def move(self, m: Move) -> Moved:
        """Move a token along an output (see :meth:`Router.move
        <flowtide.engine.run.executor.router.Router.move>`) and fire the join groups the move
        made ready: one step, under the step lock."""
        async with self.steps.hold():
            moved = await self.router.move(m)
            if moved.joins_due:
                await self.joins.evaluate()
        return moved

    # -- what the executor over the core provides ------------

    @abstractmethod
    async def drive(self, token: TokenRecord | None) -> None:
        """Drive ``token`` placement after placement."""

    @abstractmethod
    async def finalize(self) -> None:
        """End the run as :attr:`end` says (its ending)."""

    @abstractmethod
    def on_root_cancelled(self, c: Cancellation) -> None:
        """The run's root scope was cancelled: end the run (its ending)."""

    @abstractmethod
    def maybe_drained(self) -> None:
        """Settle or end the run if nothing drives it any more (its settler)."""

    @abstractmethod
    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None,
    ) -> RunClosing | None:
        """The run's end, to fold into ``c`` (a move's commit of ``ending`` to their terminals),
        if that move ends the run (its ending); None: it does not, or not alone."""

    @abstractmethod
    def ended_by_step(self, closing: RunClosing) -> None:
        """A step's commit ended the run (see :meth:`closing`; its ending)."""
