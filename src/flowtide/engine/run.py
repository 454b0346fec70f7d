"""The run executor: drives one run's tokens through its flow on the event loop.

Each live token is driven by one asyncio task, placement after placement. A parallel split
starts its branches in order, each eagerly in the splitting task (see
:mod:`flowtide.engine.eager`): a branch that runs to its end without suspending needs no task;
one that suspends (or whose node runs in a thread or a process) gets a task of its own, so
independent branches really run at the same time. Waiting
tokens (waits, retry backoffs) and parked tokens have no task at all: their due instants (a
wait, a backoff, a park deadline, escalation timers) are in the store, and the engine's sweeper
hands them back here when they are due; a signal hands a parked token back too.

When a run has only waiting and parked tokens left it is *quiescent*: its lifecycle becomes
``parked`` and, unless it is a child run (its parent is waiting on it), the executor lets go of
it: the engine forgets it, and a signal or the sweeper rebuilds an executor from the store.

A parked token is moved by exactly one of {signal, park timeout, interrupting timer, cancel}:
each first claims the token in memory (synchronously, so a second claimant in this process sees
it taken) and then commits with ``Commit.expect`` (status ``parked`` and the park's epoch; for a
signal also "deadline still ahead"), so the store refuses the loser across processes too.

Every step goes through :meth:`RunExecutor.commit` (one store commit: token records, state
keys, events), under the run's commit lock, then the events go to the hooks in order. Plain tasks
(see :class:`~flowtide.engine.plan.FastTask`) take a fast path when no hook is registered
(:meth:`RunExecutor._fast_task`): one function per step, building the same commit under the same
lock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from flowtide.authoring.nodes import NodeImplementation
from flowtide.clock import Clock, SystemClock, isoformat
from flowtide.engine import eager as eager_start
from flowtide.engine.context import NodeContext
from flowtide.engine.deadlines import (
    attempt_deadline,
    needs_node_anchor,
    resolve_window,
    timer_due,
)
from flowtide.engine.eager import Carrier
from flowtide.engine.eager import start as start_eager
from flowtide.engine.errors import (
    Cancelled,
    DrainedWithoutTerminal,
    EngineError,
    FailedTerminalError,
    NodeTimeoutError,
    PrePhaseError,
    RecursionDepthError,
    RefusalReason,
    SignalRefused,
    SubflowFailedError,
    UndeclaredOutputError,
    UnroutedOutputError,
)
from flowtide.engine.events import EventKind
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.output import Output, Park
from flowtide.engine.paths import get_path, set_path
from flowtide.engine.plan import FastTask, FlowPlan
from flowtide.engine.process import run_in_process
from flowtide.engine.reducers import StateMerger, copy_state
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult, run_result
from flowtide.engine.retry import backoff_delay, matches_retry_on, should_retry
from flowtide.engine.scope import Cancellation, CancelReason, CancelScope, ScopeDeadline
from flowtide.model.placements import (
    PARKED_OUTPUT,
    RESERVED_OUTPUTS,
    TIMEOUT_OUTPUT,
    AnyPlacement,
    Join,
    JoinMode,
    Phase,
    PhaseKind,
    Scatter,
    Subflow,
    Task,
    Terminal,
    Wait,
)
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    Checkpoint,
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    SignalAnswer,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

if TYPE_CHECKING:
    from flowtide.engine.engine import Engine

S = TokenStatus
_PARKED = Lifecycle.PARKED.value
_AT_NODE = frozenset({S.RUNNING, S.PARKED, S.WAITING})
"""Statuses of a token that is still at its placement (escalation timers may fire)."""
_KIND_NAMES = {k: k.value for k in EventKind}
_COMPUTE: Any = object()
_NO_UPDATE: Mapping[str, Any] = MappingProxyType({})
_new_context = object.__new__
_new_record = object.__new__
"""The fast paths make their contexts, most common events and a split's tokens without an
``__init__`` call (a frame per record): they set every field themselves (tests check that the
field lists stay in step)."""


@dataclass(slots=True)
class Attempt:
    """How one run of a node's code ended."""

    kind: Literal["ok", "error", "timeout", "cancelled", "park"]
    output: str | None = None
    park: Park | None = None
    state: dict[str, Any] | None = None
    update: Mapping[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    cancellation: Cancellation | None = None
    deadline: datetime | None = None


class _StepLock:
    """The run's commit lock: like ``asyncio.Lock`` (first come, first served), but taking a
    free lock is a plain call, not a coroutine (it is taken on every step)."""

    __slots__ = ("_busy", "_waiters")

    def __init__(self) -> None:
        self._busy = False
        self._waiters: collections.deque[asyncio.Future[None]] | None = None
        """Created on first contention (most runs never wait)."""

    def try_acquire(self) -> bool:
        if self._busy or self._waiters:
            return False
        self._busy = True
        return True

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = collections.deque()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self._handoff()  # it was handed to us: pass it on
            else:
                self._waiters.remove(fut)
            raise
        # Handed over by release(): _busy stayed True.

    def release(self) -> None:
        self._handoff()

    def _handoff(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._busy = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@dataclass(slots=True)
class _End:
    lifecycle: Lifecycle
    errors: list[ErrorInfo]
    interrupted: InterruptedAt | None


@dataclass(slots=True)
class _JoinGroup:
    join: str
    split: str
    count: int
    arrived: list[TokenRecord] = field(default_factory=list)
    branches: set[int] = field(default_factory=set)
    fired: bool = False
    dirty: bool = True
    """A branch may have been lost (ended or moved where it cannot reach the join): the next
    evaluation scans the live tokens. Otherwise an arrival only counts branches (O(1))."""
    lineage: tuple[tuple[str, int, int], ...] = ()
    """The lineage of the token that split (what a token leaving by ``empty`` carries)."""


class RunExecutor:
    def __init__(
        self,
        engine: Engine,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        *,
        parent_scope: CancelScope | None = None,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.flow = plan.flow
        self.run = run
        self.state = state
        self.clock = engine.clock
        self._now: Callable[[], datetime] = (
            functools.partial(datetime.now, UTC)  # SystemClock.now, without its frame
            if type(self.clock) is SystemClock
            else self.clock.now
        )
        """The clock's ``now`` (the fast paths read it once per step)."""
        self.merger = StateMerger(self.flow.reducers)
        self.root = CancelScope(parent_scope)
        self.root.on_cancel(self._root_cancelled)
        self.tokens: dict[str, TokenRecord] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        """What drives the run's tokens: tasks, and carriers (see :meth:`_carry`)."""
        self._running: dict[str, tuple[str, CancelScope]] = {}
        self._starting: set[str] = set()
        self._prestarted: set[str] = set()
        """Tokens whose move to a task also started its attempt (in the same commit)."""
        """Tokens whose attempt start is committed (or being committed) but whose cancel scope
        is not registered in ``_running`` yet: an interrupting timer firing then is kept for the
        scope (``token.data["interrupt"]``) instead of being lost."""
        self._joins: dict[tuple[str, str], _JoinGroup] = {}
        self._queue: collections.deque[TokenRecord] = collections.deque()
        """Tokens waiting for their eager start, in the order their tasks would have run."""
        self._home: asyncio.Task[Any] | None = None
        """The task draining ``_queue`` while it does (see :meth:`_start_branches`)."""
        self._carried: tuple[asyncio.Handle, list[Carrier]] | None = None
        """The last loop callback :meth:`_carry` scheduled, and the carriers it starts."""
        self._visits: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = _StepLock()
        self._end: _End | None = None
        self._outcome: str | None = None
        self._terminals: list[str] = []
        self._warnings: list[str] = []
        self._last: list[str] = []
        self._started = False
        self._closed = False
        self._deadline_timer: Any = None
        self._finalizer: asyncio.Task[None] | None = None
        self._anchors: dict[tuple[str, str | None], datetime] = {}
        """Stored node anchors of this run: (placement, item) -> first arrival."""
        self._parks: dict[str, ParkRecord] = {}
        """Open parks by token id."""
        self._closing: list[ParkRecord] = []
        """Parks closed in memory (a cancelled token), written with the next commit."""
        self._settling: asyncio.Task[None] | None = None
        self._pins = 0
        self._seq = 0
        """The seq of the last history event this executor committed (or restored), unless
        ``_stored`` is set (see :meth:`_last_seq`)."""
        self._stored: Sequence[EventRecord] | None = None
        """The events of the last commit, until their last seq is read (most runs never ask)."""
        self._expect: dict[str, Expect] = {}
        """Compare-and-set conditions for the next commit that writes these tokens."""
        self._route_ok = False
        """Whether the last :meth:`_route` committed (it returns None also for a join or split)."""
        self._recent: dict[str, ParkRecord] = {}
        """Parks closed by this executor, by park id (to tell a late signal why it is refused)."""
        self.released = False
        """The engine let go of this executor (quiescent): it must not be used any more."""
        # The loop this run lives on, known once: asking asyncio for the running loop costs a
        # getpid() system call on Python 3.11.
        self._loop = asyncio.get_running_loop()
        self.done: asyncio.Future[RunResult] = self._loop.create_future()
        self.item: Any = run.options.get("item")
        """The scatter item this (child) run works on, passed to its nodes as ``ctx.item``."""

    # ------------------------------------------------------------------------------------------
    # plumbing

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def ended(self) -> bool:
        return self._end is not None

    def event(
        self,
        kind: EventKind,
        token: TokenRecord | None = None,
        placement: str | None = None,
        data: dict[str, Any] | None = None,
        attempt: int | None = None,
    ) -> EventRecord:
        return EventRecord(
            _KIND_NAMES[kind],
            self.run.id,
            self.clock.now(),
            placement if placement is not None else (token.placement if token else None),
            attempt if attempt is not None else (token.attempt if token else None),
            token.id if token else None,
            data if data is not None else {},
        )

    def _last_seq(self) -> int:
        """The seq of the last history event this executor committed (or restored)."""
        stored = self._stored
        if stored is not None:
            if stored:
                self._seq = stored[-1].seq
            self._stored = None
        return self._seq

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        prepare: Callable[[Commit], None] | None = None,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
    ) -> bool:
        """Commit one step and hand its events to the hooks; False if skipped (run ended).

        ``prepare`` runs under the commit lock, once the step is known to go ahead: it applies
        the step's state change in memory and puts it on the commit, so that a step skipped
        because the run ended (or ``token`` was cancelled meanwhile) never touches the run state.
        """
        lock = self._lock
        if not lock.try_acquire():
            await lock.acquire()
        try:
            if unless_ended and (self._end is not None or self._closed):
                return False
            if token is not None and token.status is S.CANCELLED:
                return False
            if prepare is not None:
                prepare(c)
            if update is not None:
                # The step's state change, applied in memory and put on the commit.
                written, removed = update()
                if written:
                    c.state = written
                if removed:
                    c.state_deleted = removed
            if self._closing:
                c.parks = [*c.parks, *self._closing]
                self._closing = []
            if self._expect:
                for t in c.tokens:
                    expected = self._expect.pop(t.id, None)
                    if expected is not None:
                        c.expect = {**c.expect, t.id: expected}
            if self.run.lifecycle == _PARKED and self._end is None:
                # Something moves again: the run is running.
                self.run.lifecycle = transition(self.run.lifecycle, Lifecycle.RUNNING).value
                if c.run is None:
                    c.run = self.run
            events = await self.engine.store.commit(c)
            if events:
                self._stored = events
            if c.due:
                self.engine.sweeper.wake(min(e.when for e in c.due))
            if events and self.engine.hooks:
                await self.engine.dispatch(events)
        finally:
            lock.release()
        return True

    def _new_token(self, placement: str, lineage: tuple[tuple[str, int, int], ...]) -> TokenRecord:
        t = TokenRecord(
            id=f"{self.run.id}.{next(self._ids)}",
            run_id=self.run.id,
            placement=placement,
            status=S.READY,
            visit=self._next_visit(placement),
            lineage=lineage,
            created_at=self.clock.now(),
        )
        self.tokens[t.id] = t
        return t

    def _split_tokens(
        self, token: TokenRecord, targets: Sequence[str], split: str
    ) -> list[TokenRecord]:
        """``token`` (done) and the new tokens of its split, one per target, as
        :meth:`_new_token` makes them (in one pass: the split's tokens are made at one instant)."""
        run_id = self.run.id
        now = self.clock.now()
        ids = self._ids
        visits = self._visits
        tokens = self.tokens
        lineage = token.lineage
        n = len(targets)
        ready = S.READY
        moved = [token]
        for i, target in enumerate(targets):
            visit = visits.get(target, 0) + 1
            visits[target] = visit
            t = TokenRecord(
                f"{run_id}.{next(ids)}",
                run_id,
                target,
                ready,
                1,
                visit,
                (*lineage, (split, i, n)),
                None,
                None,
                now,
                {},
                0,
            )
            tokens[t.id] = t
            moved.append(t)
        return moved

    def _split_started(
        self, token: TokenRecord, targets: Sequence[str], split: str, nodes: Sequence[str]
    ) -> tuple[list[TokenRecord], list[EventRecord]]:
        """:meth:`_split_tokens`, each new token with its attempt started at its target (a task
        with no window and no timers, running the node in ``nodes`` at the same index): the
        tokens, and their ``node_started`` events (what :meth:`_route` does for each, in one
        pass)."""
        run_id = self.run.id
        now = self._now()
        at = self._now()  # the events' instant is taken after the tokens' (as _route)
        ids = self._ids
        visits = self._visits
        tokens = self.tokens
        starting = self._starting
        lineage = token.lineage
        n = len(targets)
        running = S.RUNNING
        new = _new_record
        moved = [token]
        events = []
        for i, target in enumerate(targets):
            visit = visits.get(target, 0) + 1
            visits[target] = visit
            tid = f"{run_id}.{next(ids)}"
            # TokenRecord(...) and EventRecord(...), without the calls' frames.
            t = new(TokenRecord)
            t.id = tid
            t.run_id = run_id
            t.placement = target
            t.status = running
            t.attempt = 1
            t.visit = visit
            t.lineage = (*lineage, (split, i, n))
            t.deadline = None
            t.due = None
            t.created_at = now
            t.data = {}
            t.epoch = 0
            tokens[tid] = t
            starting.add(tid)
            moved.append(t)
            e = new(EventRecord)
            e.kind = "node_started"
            e.run_id = run_id
            e.at = at
            e.placement = target
            e.attempt = 1
            e.token_id = tid
            e.data = {"visit": visit, "node": nodes[i], "deadline": None}
            e.seq = 0
            events.append(e)
        return moved, events

    def _next_visit(self, placement: str) -> int:
        n = self._visits.get(placement, 0) + 1
        self._visits[placement] = n
        return n

    def spawn(self, token: TokenRecord) -> None:
        if self._home is not None:
            # Branches are being started eagerly in this task (_start_branches): queued behind
            # them, as this task would have been on the loop.
            self._queue.append(token)
            return
        task = asyncio.get_running_loop().create_task(self._drive(token))
        self._tasks.add(task)

    def _spawn_aux(self, coro: Awaitable[Any]) -> None:
        async def wrapper() -> None:
            try:
                await coro
            except StoreConflict:
                # Another engine on the same store moved the token first (its commit won the
                # compare-and-set): what this executor knows is stale.
                self.engine._discard(self)
            except asyncio.CancelledError:
                if not self._closed:
                    raise
            except Exception as exc:
                self._request_end(Lifecycle.FAILED, [ErrorInfo.of(exc)])

        task = asyncio.get_running_loop().create_task(wrapper())
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._maybe_drained()

        task.add_done_callback(done)

    # ------------------------------------------------------------------------------------------
    # starting, ending

    def launch(self, entry: str | None) -> None:
        """Start :meth:`main` in its own task (held until it ends)."""
        self._tasks.add(asyncio.get_running_loop().create_task(self.main(entry)))

    async def main(self, entry: str | None) -> None:
        """Start the run: lifecycle running, pre phases, then the entrypoint's token."""
        task = eager_start.current_task(self._loop)
        assert task is not None
        try:
            if self._end is not None:
                return
            self.run.lifecycle = transition(self.run.lifecycle, Lifecycle.RUNNING).value
            self.run.started_at = self.clock.now()
            self._started = True
            pre = self.flow.phases(PhaseKind.PRE)
            first: list[TokenRecord] = []
            events = [
                self.event(
                    EventKind.RUN_STARTED,
                    data={
                        "flow": self.flow.id,
                        "version": self.flow.version,
                        "deadline": isoformat(self.run.deadline) if self.run.deadline else None,
                    },
                )
            ]
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            if not pre:
                # No pre phase: the entrypoint's token is created in the same commit, and its
                # first attempt started there too when it is a task.
                token = self._new_token(self._entry_target(entry), ())
                first = [token]
                q = self.plan.placements.get(token.placement)
                if q is not None and q.kind == "task":
                    started, anchors, due = self._start(
                        token, q.id, self.plan.impls[q.id], self.plan.settings[q.id]
                    )
                    events.append(started)
                    self._prestarted.add(token.id)
            await self.commit(
                Commit(
                    self.run.id, run=self.run, tokens=first, events=events, anchors=anchors, due=due
                )
            )
            self._arm_deadline()
            if self._end is not None:
                return
            if first:
                await self._drive(first[0])  # in this task: no task of its own
                return
            for phase in pre:
                err = await self._run_phase(phase)
                if self._end is not None:
                    return
                if err is not None:
                    self._request_end(Lifecycle.FAILED, [err])
                    return
            token = self._new_token(self._entry_target(entry), ())
            await self.commit(Commit(self.run.id, tokens=[token]))
            self.spawn(token)
        except Exception as exc:
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(exc)])
        finally:
            self._tasks.discard(task)
            self._maybe_drained()

    def _entry_target(self, entry: str | None) -> str:
        if entry is not None and entry in self.flow.entrypoints:
            return self.flow.entrypoints[entry]
        return entry or self.flow.main_entrypoint

    def _arm_deadline(self) -> None:
        if self.run.deadline is None or self._end is not None:
            return
        deadline = self.run.deadline

        def fire() -> None:
            self.root.cancel(CancelReason.RUN_DEADLINE, deadline)

        self._deadline_timer = self.clock.call_at(deadline, fire)

    def cancel(self, reason: str | None = None) -> bool:
        """The caller's cancel: every running node is cancelled; lifecycle ``cancelled``."""
        if self._end is not None:
            return False
        return self.root.cancel(CancelReason.ABORT, self.clock.now(), reason)

    def _root_cancelled(self, c: Cancellation) -> None:
        if self._end is not None:
            return
        timeout = c.reason in (CancelReason.RUN_DEADLINE, CancelReason.NODE_TIMEOUT)
        lifecycle = Lifecycle.TIMED_OUT if timeout else Lifecycle.CANCELLED
        reason = "timeout" if timeout else "abort"
        nodes = tuple(dict.fromkeys(p for p, _ in self._running.values()))
        if not nodes:
            nodes = tuple(dict.fromkeys(t.placement for t in self.tokens.values()))
        if not nodes and not self._started:
            nodes = (self.flow.main_entrypoint,)
        interrupted = InterruptedAt(reason, nodes[0] if nodes else None, c.at, nodes)
        errors = []
        if c.message:
            errors.append(ErrorInfo("RunCancelled", c.message, None))
        self._request_end(lifecycle, errors, interrupted, cancel_reason=None)

    def _request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None:
        if self._end is not None or self._closed:
            return
        self._end = _End(lifecycle, list(errors), interrupted)
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        if cancel_reason is not None:
            self.root.cancel(cancel_reason, self.clock.now())
        self._finalizer = asyncio.get_running_loop().create_task(self._finalize())

    def _maybe_drained(self) -> None:
        if self._end is not None or self._closed or self._tasks or not self._started:
            return
        if self.released:
            return
        if self._pins:
            return
        if any(t.status in (S.WAITING, S.PARKED) for t in self.tokens.values()):
            settling = self._settling is not None and not self._settling.done()
            if not settling and self.quiescent():
                self._settling = asyncio.get_running_loop().create_task(self._settle())
            return
        if self.tokens:
            stuck = sorted({t.placement for t in self.tokens.values()})
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(DrainedWithoutTerminal(stuck))])
        elif self._terminals:
            self._request_end(Lifecycle.COMPLETED)
        else:
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(DrainedWithoutTerminal(self._last))])

    def quiescent(self) -> bool:
        """Only waiting/parked (and join-arrived) tokens are left, and nothing runs."""
        if self._end is not None or self._closed or self._tasks or self._pins:
            return False
        statuses = {t.status for t in self.tokens.values()}
        return bool(statuses & {S.WAITING, S.PARKED}) and not statuses & {S.READY, S.RUNNING}

    def parked_tokens(self) -> tuple[ParkedToken, ...]:
        out = []
        for t in self.tokens.values():
            park = self._parks.get(t.id)
            if t.status is S.PARKED and park is not None:
                out.append(
                    ParkedToken(
                        t.id, t.placement, park.key, t.deadline, park.payload, park.parked_at
                    )
                )
        return tuple(out)

    def snapshot(self) -> RunResult:
        """The run as it is now (lifecycle ``parked`` at a quiescent point)."""
        return RunResult(
            run_id=self.run.id,
            lifecycle=Lifecycle(self.run.lifecycle),
            outcome=None,
            state=dict(self.state),
            parked=self.parked_tokens(),
            warnings=tuple(self._warnings),
            terminals=tuple(self._terminals),
        )

    async def _settle(self) -> None:
        """The run is quiescent: lifecycle ``parked``, tell who waits, and let go of it."""
        await asyncio.sleep(0)
        async with self._lock:
            if not self.quiescent():
                return
            c = Commit(self.run.id)
            if self.run.lifecycle != Lifecycle.PARKED.value:
                self.run.lifecycle = transition(self.run.lifecycle, Lifecycle.PARKED).value
                c.run = self.run
            let_go = self.run.parent_run_id is None
            if let_go and self.run.deadline is not None:
                # Nothing holds the run's deadline timer any more: the sweeper will.
                c.due = [DueEntry(self.run.deadline, self.run.id, self.run.id, "deadline")]
            if let_go:
                # What a rebuild needs beyond the tokens, so that it reads no older history.
                self.run.checkpoint = Checkpoint(
                    self._last_seq(), dict(self._visits), list(self._terminals), self._outcome
                )
                c.run = self.run
            if c.run is not None or c.due:
                await self.engine.store.commit(c)
                if c.due:
                    self.engine.sweeper.wake(c.due[0].when)
            if not self.quiescent():
                return
            result = self.snapshot()
            if let_go:
                self.released = True
                if self._deadline_timer is not None:
                    self._deadline_timer.cancel()
                    self._deadline_timer = None
                self.root.close()
                self.engine._let_go(self)
        self.engine._settled(result)

    def pin(self) -> bool:
        """Keep the executor from being let go while a signal or a firing works on it; False if
        it has already been let go (rebuild one from the store)."""
        if self.released or self._closed:
            return False
        self._pins += 1
        return True

    def unpin(self) -> None:
        self._pins -= 1
        self._maybe_drained()

    async def _finalize(self) -> None:
        me = eager_start.current_task(self._loop)
        while True:
            pending = [t for t in self._tasks if t is not me and not t.done()]
            if not pending:
                break
            await asyncio.gather(*pending, return_exceptions=True)
        if self._closed:
            return
        end = self._end
        assert end is not None
        try:
            leftovers = list(self.tokens.values())
            self.tokens.clear()
            why = _end_reason(end)
            for t in leftovers:
                t.status = S.CANCELLED
                t.epoch += 1
                self._close_park(t, ParkStatus.CANCELLED, why)
            events = [
                self.event(EventKind.TOKEN_CANCELLED, t, data={"reason": "run_ended"})
                for t in leftovers
            ]
            released = list(self._anchors)
            self._anchors.clear()
            if leftovers or released or self._closing:
                await self.commit(
                    Commit(
                        self.run.id,
                        tokens=leftovers,
                        events=events,
                        due_cleared=[t.id for t in leftovers],
                        anchors_released=released,
                    )
                )
            if self._started and self.plan.post:
                for phase in self.flow.phases(PhaseKind.POST):
                    err = await self._run_phase(phase, post=True)
                    if err is not None:
                        msg = f"post phase {phase.id!r} failed: {err.type}: {err.message}"
                        self._warnings.append(msg)
                        await self.commit(
                            Commit(
                                self.run.id,
                                events=[
                                    self.event(
                                        EventKind.WARNING, placement=phase.id, data={"message": msg}
                                    )
                                ],
                            )
                        )
            result = end_result(
                self.run.id,
                end.lifecycle,
                dict(self.state),
                self._terminals,
                self._outcome,
                errors=end.errors,
                interrupted=end.interrupted,
                warnings=self._warnings,
            )
            finished = finish(self.run, result, self.clock.now())
            await self.commit(
                Commit(
                    self.run.id,
                    run=self.run,
                    due_cleared=[self.run.id] if self.run.deadline is not None else (),
                    events=[finished],
                )
            )
        except BaseException as exc:
            if not self.done.done():
                self.done.set_exception(exc)
            raise
        finally:
            self.root.close()
            self.engine._forget(self)
        if not self.done.done():
            self.done.set_result(result)
        self.engine._ended(result)

    def close(self, notify: bool = True) -> None:
        """Stop driving this run without recording anything (the engine is closing)."""
        self._closed = True
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._finalizer is not None:
            self._finalizer.cancel()
        if not self.done.done():
            from flowtide.engine.errors import EngineError

            self.done.set_exception(
                EngineError(f"the engine was closed; resume run {self.run.id!r} to finish it")
            )
            self.done.exception()  # retrieved: nobody may be waiting

    # ------------------------------------------------------------------------------------------
    # driving tokens

    async def _drive(self, token: TokenRecord | None, eager: bool = False) -> None:
        """Drive ``token`` placement after placement. ``eager``: started by
        :meth:`_start_branches` (the task it may end in is not this coroutine's to discard)."""
        plan = self.plan
        placements = plan.placements
        fasts = plan.fast
        try:
            while token is not None:
                if self._end is not None or token.status is S.CANCELLED:
                    return
                fast = fasts.get(token.placement)
                if fast is not None and token.id in self._prestarted and not self.engine.hooks:
                    token = await self._fast_task(token, fast.task, fast)  # as _task would
                    continue
                p = placements[token.placement]
                token = await _HANDLERS[p.kind](self, token, p)
        except asyncio.CancelledError:
            if not self._closed:
                raise
        except StoreConflict:
            self.engine._discard(self)  # another engine moved this token first
        except Exception as exc:
            placement = token.placement if token is not None else None
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(exc, placement)])
        finally:
            if not eager:
                self._tasks.discard(eager_start.current_task(self._loop))
            if not self._tasks:  # else _maybe_drained has nothing to do
                self._maybe_drained()

    def _branch_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._maybe_drained()

    def _start_branches(self, tokens: Sequence[TokenRecord]) -> None:
        """Start the branches of a split eagerly in this task (see :mod:`flowtide.engine.eager`):
        a branch runs until it ends or first suspends, and only a branch that suspends gets a
        task of its own, which its node's cancel scope is bound to.

        The order is the one spawning gave: the first branch goes on at once (it went on in the
        splitting task), the others are queued behind what is already queued (their tasks ran
        in creation order). A queue drained by the outermost call in this task stands for the
        loop's ready queue: a branch that splits again, or a join that fires, queues behind
        it, as its task would have been (see :meth:`spawn`).
        """
        queue = self._queue
        queue.extend(tokens[1:])
        home = self._home
        if home is not None:
            # Within a drain (this task, synchronously): it starts the queued ones in turn.
            self._start_branch(tokens[0], home)
            return
        home = self._home = eager_start.current_task(self._loop)
        try:
            self._start_branch(tokens[0], home)
            while queue:
                if self._closed:
                    break
                self._start_branch(queue.popleft(), home)
        finally:
            self._home = None
            queue.clear()

    def _start_branch(self, t: TokenRecord, home: asyncio.Task[Any] | None) -> None:
        if t.placement in self.plan.off_loop:
            # Its node always suspends (a thread, a process): not started eagerly, but where a
            # task of its own would start it; for a thread, a carrier stands for that task.
            if t.placement in self.plan.threaded:
                self._carry(t, self._loop)
            else:
                self._tasks.add(self._loop.create_task(self._drive(t)))
            return
        try:
            task = start_eager(self._drive(t, True), self._loop, home)
        except asyncio.CancelledError:
            return  # the node raised it itself: a spawned branch would end so, silently
        if task is None:
            return
        self._tasks.add(task)
        task.add_done_callback(self._branch_done)
        # Nothing ran since the branch suspended: its node's scope, bound to this task during
        # the first step, is bound to the task that runs the node from now on.
        attempt = self._running.get(t.id)
        if attempt is not None and attempt[1]._task is home:
            attempt[1]._task = task

    def _carry(self, t: TokenRecord, loop: asyncio.AbstractEventLoop) -> None:
        """``create_task(self._drive(t))``, with a carrier for the task (see
        :class:`~flowtide.engine.eager.Carrier`): cheaper to make, and its first step runs where
        the task's would, in a loop callback scheduled now. Carriers made one after the other,
        with nothing scheduled on the loop in between, share that callback (their tasks' first
        steps would have run back to back)."""
        carrier = Carrier.of(self._drive(t), loop)
        self._tasks.add(carrier)
        carried = self._carried
        if carried is not None:
            ready = getattr(loop, "_ready", None)  # the loop's ready queue (asyncio's own loop)
            if ready and ready[-1] is carried[0]:
                carried[1].append(carrier)
                return
        carriers = [carrier]
        self._carried = (loop.call_soon(self._first_steps, carriers), carriers)

    def _first_steps(self, carriers: list[Carrier]) -> None:
        """The loop callback of :meth:`_carry`: the carriers' first steps, in order."""
        carried = self._carried
        if carried is not None and carried[1] is carriers:
            self._carried = None
        pool = self.engine._threads
        burst = pool.burst() if pool is not None else contextlib.nullcontext()
        with burst:  # each branch submits its node: one worker wake-up for all, after them
            for i, carrier in enumerate(carriers):
                try:
                    carrier._context.run(carrier.step)  # carrier.start(), inline
                except BaseException:
                    # KeyboardInterrupt, SystemExit: the others start in a later callback, as
                    # their tasks' steps would still be ready.
                    rest = carriers[i + 1 :]
                    if rest:
                        carrier.get_loop().call_soon(self._first_steps, rest)
                    raise

    async def _route(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        output: str,
        *,
        event: EventRecord,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        extra: Sequence[TokenRecord] = (),
        extra_events: Sequence[EventRecord] = (),
        due_cleared: Sequence[str] = (),
        answers: Sequence[Any] = (),
        eager: bool = False,
    ) -> TokenRecord | None:
        """Move ``token`` along ``output`` (a split makes new tokens), committing it all.

        ``eager``: the caller drives ``token`` (a placement handler): the branches of a split
        are started here, eagerly and in order, and None is returned. Otherwise the first moved
        token is returned to go on with and the others get tasks of their own.

        The token's due entries (park deadline, timers, backoff) are dropped, its open park is
        closed (as moved on, unless the caller closed it already), and node anchors are released
        when ``output`` is in the placement's ``release_on`` or is ``timeout``, or when the move
        leaves an anchored placement's loop.
        """
        targets = p.route_map().get(output)
        if not targets:
            err = UnroutedOutputError(p.id, output, list(p.route_map()))
            await self.commit(Commit(self.run.id, events=[event, *extra_events]), unless_ended=True)
            self._fail_token(token, err)
            return None
        if token.data or token.id in self._parks:
            due_cleared = [*due_cleared, token.id]
            self._close_park(token, ParkStatus.SIGNALLED, "moved")
        released = self._releases(token, p, output, targets) if self._anchors else []
        moved: list[TokenRecord]
        started: list[EventRecord] = []
        split_id: str | None = None
        if len(targets) == 1:
            move_token(token, targets[0], self._next_visit(targets[0]))
            moved = [token]
        else:
            token.epoch += 1
            split = split_id = f"{token.id}/{p.id}#{token.visit}"
            n = len(targets)
            token.status = S.DONE
            self.tokens.pop(token.id, None)
            self._expect_joins(split, n, token.lineage, targets)
            nodes = None if released else self.plan.started_nodes(targets)
            if nodes is not None:
                open_splits = self._open_splits(split_id)
                if open_splits and any(f[0] in open_splits for f in token.lineage):
                    nodes = None
            if nodes is not None:
                # Every branch arrives at a task with no window and no timers, and no open
                # join acts on it: each token is made with its attempt started, as the loop
                # below would start it, in one pass.
                moved, started = self._split_started(token, targets, split, nodes)
            else:
                moved = self._split_tokens(token, targets, split)
        event.data["to"] = list(targets)
        events = [event, *extra_events]
        anchors: list[NodeAnchor] = []
        due: list[DueEntry] = []
        prestarted: list[str] = []
        if started:
            events.extend(started)
            nxt = moved[1:]
            prestarted = [t.id for t in nxt]
        else:
            nxt = [t for t in moved if t.status is S.READY]
        ending: list[tuple[TokenRecord, Terminal]] = []
        if not self._joins and not started:
            # A move to a (non-failing) terminal also records the terminal, in the same commit.
            for t in nxt:
                q = self.plan.placements[t.placement]
                if isinstance(q, Terminal) and not q.fails:
                    t.status = S.DONE
                    ending.append((t, q))
            if ending:
                for t, q in ending:
                    events.append(terminal_event(self.run.id, self.clock.now(), t, q))
                nxt = [t for t in nxt if t.status is S.READY]
        if not released and not started:
            # One commit per step: the move also starts the next attempt of each moved token
            # that arrives at a task (unless a join may still act on it, see _prestartable).
            open_splits = self._open_splits(split_id)
            started_at = self.plan.started
            now = self.clock.now()
            for t in nxt:
                node = started_at.get(t.placement)
                if node is not None and (
                    not open_splits or not any(f[0] in open_splits for f in t.lineage)
                ):
                    # What _start does for a task with no window and no timers.
                    t.status = S.RUNNING
                    self._starting.add(t.id)
                    t.deadline = None
                    events.append(
                        EventRecord(
                            "node_started",
                            self.run.id,
                            now,
                            t.placement,
                            t.attempt,
                            t.id,
                            {"visit": t.visit, "node": node, "deadline": None},
                        )
                    )
                    prestarted.append(t.id)
                elif self._prestartable(t, open_splits):
                    q = self.plan.placements[t.placement]
                    impl = self.plan.impls[q.id]
                    begun, new_anchors, new_due = self._start(
                        t, q.id, impl, self.plan.settings[q.id]
                    )
                    events.append(begun)
                    anchors.extend(new_anchors)
                    due.extend(new_due)
                    prestarted.append(t.id)
        ok = await self.commit(
            Commit(
                self.run.id,
                tokens=[*moved, *extra],
                events=events,
                due_cleared=due_cleared,
                due=due,
                anchors=anchors,
                anchors_released=released,
                signal_answers=answers,
            ),
            unless_ended=True,
            token=token,
            update=update,
        )
        self._route_ok = ok
        if not ok:
            for t_id in prestarted:
                self._starting.discard(t_id)
            for t, _ in ending:
                t.status = S.READY
            return None
        self._prestarted.update(prestarted)
        for t, q in ending:
            self.tokens.pop(t.id, None)
            self._terminals.append(q.id)
            if self._outcome is None:
                self._outcome = q.outcome
        for key in released:
            self._anchors.pop(key, None)
        # A split whose every branch can reach every join it opened marks none of those
        # groups: the others (of enclosing splits) are looked at as for any move.
        note = bool(self._joins) and (
            split_id is None
            or not self.plan.reaches_joins(targets)
            or any(g.split != split_id for g in self._joins.values())
        )
        if eager and len(nxt) > 1:
            if note and self._note_moves(nxt):
                await self._evaluate_joins()
            self._start_branches(nxt)
            return None
        for other in nxt[1:]:
            self.spawn(other)
        if note and self._note_moves(nxt):
            await self._evaluate_joins()
        return nxt[0] if nxt else None

    def _open_splits(self, new_split: str | None) -> set[str]:
        """The splits of the open join groups but ``new_split`` (the split a move made, whose
        fresh groups cannot fire by it): what :meth:`_prestartable` looks at."""
        if not self._joins:
            return set()
        open_splits = {g.split for g in self._joins.values()}
        if new_split is not None:
            open_splits.discard(new_split)
        return open_splits

    def _prestartable(self, t: TokenRecord, open_splits: set[str]) -> bool:
        """Whether ``t``'s move may also start its next attempt: it arrives at a task, and no
        open join group (``open_splits``, see :meth:`_open_splits`) can act on it when the move
        is evaluated."""
        if self.plan.placements[t.placement].kind != "task":
            return False
        if not open_splits or not t.lineage:
            return True
        return not any(f[0] in open_splits for f in t.lineage)

    def _fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None:
        token.status = S.FAILED
        self.tokens.pop(token.id, None)
        self._request_end(Lifecycle.FAILED, [ErrorInfo.of(exc, token.placement)], interrupted)

    # ------------------------------------------------------------------------------------------
    # node attempts

    async def invoke(
        self,
        impl: NodeImplementation,
        settings: NodeSettings,
        placement: str,
        state: Mapping[str, Any],
        *,
        parent: CancelScope,
        key: str,
        attempt: int,
        visit: int,
        item: Any = None,
        token: TokenRecord | None = None,
        deadline: datetime | None = _COMPUTE,
        signal: Any = None,
    ) -> Attempt:
        """Run the node's code once in its own child scope, bounded by its window.

        ``deadline``: the attempt's window end, when the caller has already resolved (and
        stored) it; computed here otherwise.
        """
        now = self.clock.now()
        if token is not None:
            self._starting.discard(token.id)
            if "interrupt" in token.data:
                # An interrupting timer fired since this attempt's start was committed.
                cancelled = Cancellation(CancelReason.TIMER, now, placement)
                return Attempt("cancelled", cancellation=cancelled)
        if deadline is _COMPUTE:
            deadline = attempt_deadline(settings, now=now, run_created_at=self.run.created_at)
            if token is not None:
                token.deadline = deadline
        if deadline is not None and deadline <= now:
            return Attempt("timeout", deadline=deadline)
        scope = CancelScope(parent, placement)
        if scope.cancellation is not None:
            scope.close()
            return Attempt("cancelled", cancellation=scope.cancellation)
        window = ScopeDeadline(self.clock, scope, deadline)
        ctx = NodeContext(
            state=copy_state(state),
            run_id=self.run.id,
            placement=placement,
            attempt=attempt,
            visit=visit,
            item=item if item is not None else self.item,
            clock=self.clock,
            scope=scope,
            signal=signal,
        )
        value: Any = None
        final_state: dict[str, Any] = ctx.state
        error: BaseException | None = None
        self._running[key] = (placement, scope)
        try:
            with scope.bind():
                try:
                    if impl.is_async:
                        value = await impl.fn(ctx)
                    elif impl.execution == "inline":
                        value = impl.fn(ctx)
                    elif impl.execution == "thread":
                        if type(self.clock).hold is Clock.hold:  # nothing to hold (SystemClock)
                            value = await self.engine.threads.submit(impl.fn, ctx)
                        else:
                            with self.clock.hold():
                                value = await self.engine.threads.submit(impl.fn, ctx)
                    else:

                        def started(pid: int) -> None:
                            if token is not None:
                                self._spawn_aux(
                                    self.commit(
                                        Commit(
                                            self.run.id,
                                            events=[
                                                self.event(
                                                    EventKind.PROCESS_STARTED,
                                                    token,
                                                    placement=placement,
                                                    data={"pid": pid},
                                                )
                                            ],
                                        )
                                    )
                                )

                        value, final_state = await run_in_process(
                            impl, ctx, scope, self.clock, started
                        )
                except Exception as exc:
                    error = exc
                except Cancelled:
                    pass
        finally:
            window.disarm()
            scope.close()
            self._running.pop(key, None)
        return self._attempt_end(
            impl, placement, scope, window, deadline, value, error, final_state, token is not None
        )

    def _attempt_end(
        self,
        impl: NodeImplementation,
        placement: str,
        scope: CancelScope,
        window: ScopeDeadline,
        deadline: datetime | None,
        value: Any,
        error: BaseException | None,
        state: dict[str, Any],
        parkable: bool,
    ) -> Attempt:
        """How an attempt whose scope is closed ended: its cancellation (a timeout when its
        window fired), its error, or what its value asks for (``parkable``: a park request is
        allowed here)."""
        if scope.cancellation is not None:
            if window.fired:
                return Attempt("timeout", deadline=deadline, cancellation=scope.cancellation)
            return Attempt("cancelled", cancellation=scope.cancellation)
        if error is not None:
            return Attempt("error", error=error, deadline=deadline)
        try:
            name, update, park = self._interpret(impl, placement, value, state)
        except UndeclaredOutputError as exc:
            return Attempt("error", error=exc)
        if park is not None:
            if not parkable:
                err = EngineError(f"node {impl.id!r} at {placement!r} parked where it cannot")
                return Attempt("error", error=err)
            return Attempt("park", state=state, update=update, park=park, deadline=deadline)
        return Attempt("ok", output=name, state=state, update=update, deadline=deadline)

    def _interrupted_before_start(self, token: TokenRecord) -> bool:
        """The attempt's scope is about to be registered: True if an interrupting timer fired
        since its start was committed (the attempt is cancelled at once, reason ``timer``)."""
        self._starting.discard(token.id)
        return "interrupt" in token.data

    @staticmethod
    def _interpret(
        impl: NodeImplementation, placement: str, value: Any, state: Mapping[str, Any]
    ) -> tuple[str, Mapping[str, Any], Park | None]:
        update: Mapping[str, Any] = {}
        if isinstance(value, Park):
            return PARKED_OUTPUT, update, value
        if isinstance(value, Output):
            name: Any = value.name
            update = value.update
        elif value is None and len(impl.outputs) == 1:
            name = impl.outputs[0]
        else:
            name = value
        if name == PARKED_OUTPUT:
            key = update.get("correlation_key", state.get("correlation_key"))
            return name, update, Park(key=str(key) if key is not None else None)
        if not isinstance(name, str) or name not in impl.outputs:
            raise UndeclaredOutputError(impl.id, placement, name, impl.outputs)
        return name, update, None

    def state_update(
        self, base: Mapping[str, Any], attempt: Attempt
    ) -> tuple[dict[str, Any], list[str]]:
        """Merge a finished attempt's changes into the run state (returns what to commit)."""
        assert attempt.state is not None
        changed, deleted = self.merger.changes(base, attempt.state)
        if not changed and not deleted and not attempt.update:
            return {}, []
        return self.merger.apply(self.state, base, changed, deleted, attempt.update)

    # ------------------------------------------------------------------------------------------
    # windows, anchors, parks

    def _arm(
        self, token: TokenRecord, placement: str, settings: NodeSettings, now: datetime
    ) -> tuple[list[NodeAnchor], list[DueEntry]]:
        """Resolve the token's window (and timers) at an attempt's start or a park.

        Returns the node anchor to store (first arrival) and the timers' due entries. Timers
        that already fired during this visit are not armed again.
        """
        if settings.timeout is None and not settings.timers:
            token.deadline = None  # the common case: no window, no timers
            return [], []
        new: list[NodeAnchor] = []
        anchor_at: datetime | None = None
        if needs_node_anchor(settings):
            anchor_at = self._anchors.get((placement, None))
            if anchor_at is None:
                anchor_at = self._anchors[(placement, None)] = now
                new.append(NodeAnchor(self.run.id, placement, None, now))
        window = resolve_window(
            settings, now=now, run_created_at=self.run.created_at, node_anchor=anchor_at
        )
        token.deadline = window.deadline
        if window.deadline is not None:
            token.data["window"] = window.to_data()
        due: list[DueEntry] = []
        if settings.timers:
            fired = token.data.get("fired_timers", ())
            armed: dict[str, str] = {}
            for i, timer in enumerate(settings.timers):
                if i in fired:
                    continue
                when = timer_due(
                    timer, now=now, run_created_at=self.run.created_at, node_anchor=anchor_at
                )
                armed[str(i)] = isoformat(when)
                due.append(DueEntry(when, self.run.id, token.id, f"timer:{token.visit}:{i}"))
            token.data["timers"] = armed
        return new, due

    async def item_anchor(self, placement: str, item: str) -> datetime:
        """The node anchor of one scatter item: stored on the item's first arrival."""
        key = (placement, item)
        found = self._anchors.get(key)
        if found is None:
            found = self._anchors[key] = self.clock.now()
            await self.commit(
                Commit(self.run.id, anchors=[NodeAnchor(self.run.id, placement, item, found)])
            )
        return found

    def _releases(
        self, token: TokenRecord, p: AnyPlacement, output: str, targets: Sequence[str]
    ) -> list[tuple[str, str | None]]:
        """Node anchors released by moving ``token`` from ``p`` along ``output``."""
        out: list[tuple[str, str | None]] = []
        settings = self.plan.settings.get(p.id)
        own = output == TIMEOUT_OUTPUT or (
            settings is not None and output in (settings.release_on or ())
        )
        for key in self._anchors:
            anchored = key[0]
            if anchored == p.id and own:
                out.append(key)
                continue
            # Left the loop: no target, and no other live token, can come back to it.
            if any(t == anchored or self.plan.can_reach(t, anchored) for t in targets):
                continue
            if any(
                o is not token
                and o.status.live
                and (o.placement == anchored or self.plan.can_reach(o.placement, anchored))
                for o in self.tokens.values()
            ):
                continue
            out.append(key)
        return out

    def _close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None:
        park = self._parks.pop(token.id, None)
        if park is None:
            return
        park.status = status
        park.closed_at = self.clock.now()
        park.closed_by = by
        self._recent[park.id] = park
        self._closing.append(park)

    def park_record(self, park_id: str) -> ParkRecord | None:
        """The park as this executor knows it (open, or closed by it), else None."""
        for park in self._parks.values():
            if park.id == park_id:
                return park
        return self._recent.get(park_id)

    async def _park(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
        eager: bool = False,
    ) -> TokenRecord | None:
        request = attempt.park
        assert request is not None
        now = self.clock.now()
        anchors, due = self._arm(token, p.id, settings, now)
        if token.deadline is not None and token.deadline <= now:
            timeout = Attempt("timeout", deadline=token.deadline)
            return await self._after_attempt(
                token, p, node_id, settings, base, timeout, eager=eager
            )
        token.status = S.PARKED
        token.epoch += 1
        park = ParkRecord(
            f"{token.id}#{token.epoch}",
            self.run.id,
            token.id,
            p.id,
            token.visit,
            token.epoch,
            now,
            token.deadline,
            request.key,
            request.payload,
        )
        if token.deadline is not None:
            # First in the commit: at the same instant as a timer, the timeout is claimed first.
            due.insert(0, DueEntry(token.deadline, self.run.id, token.id, "timeout"))
        ev = self.event(
            EventKind.PARKED,
            token,
            data={
                "key": request.key,
                "deadline": isoformat(token.deadline) if token.deadline else None,
                "park": park.id,
            },
        )
        self._parks[token.id] = park
        ok = await self.commit(
            Commit(
                self.run.id, tokens=[token], events=[ev], due=due, anchors=anchors, parks=[park]
            ),
            unless_ended=True,
            update=lambda: self.state_update(base, attempt),
            token=token,
        )
        if not ok:
            self._parks.pop(token.id, None)
        return None

    # ------------------------------------------------------------------------------------------
    # the sweeper's firings and signals

    def fire_due(self, entry: DueEntry) -> None:
        """The sweeper says this due entry has come (see :class:`~flowtide.store.DueEntry`)."""
        if self._end is not None or self._closed:
            return
        purpose = entry.purpose
        if purpose == "deadline":
            if self.run.deadline is not None:
                self.root.cancel(CancelReason.RUN_DEADLINE, self.run.deadline)
            return
        token = self.tokens.get(entry.token_id)
        if token is None:
            return
        if purpose == "":
            # Not yet due (the entry is stale: the token waits again, for a later instant).
            if token.status is not S.WAITING or (token.due is not None and token.due > entry.when):
                return
            token.data["fired"] = token.data.get("purpose", "wait")
            token.status = S.READY
            self._expect[token.id] = Expect(S.WAITING, token.epoch)
            self.spawn(token)
        elif purpose == "timeout":
            # The token's own deadline must have passed by the entry's instant; an entry fired
            # late (or deferred by an engine that could not fire it) still counts.
            if (
                token.status is not S.PARKED
                or token.deadline is None
                or token.deadline > entry.when
            ):
                return
            epoch = token.epoch
            token.status = S.READY  # claimed
            self._close_park(token, ParkStatus.TIMED_OUT, "timeout")
            self._expect[token.id] = Expect(S.PARKED, epoch)
            self._spawn_aux(self._park_timeout(token))
        elif purpose.startswith("timer:"):
            _, visit, index = purpose.split(":")
            if (
                token.visit != int(visit)
                or token.status not in _AT_NODE
                or index not in token.data.get("timers", {})
            ):
                return
            self._fire_timer(token, int(index))

    async def _park_timeout(self, token: TokenRecord) -> None:
        p = self.plan.placements[token.placement]
        impl = self.plan.impls.get(p.id)
        settings = self.plan.settings[p.id]
        attempt = Attempt("timeout", deadline=token.deadline)
        token.status = S.RUNNING
        nxt = await self._after_attempt(
            token, p, impl.id if impl else p.id, settings, dict(self.state), attempt
        )
        if nxt is not None:
            self.spawn(nxt)

    def _fire_timer(self, token: TokenRecord, index: int) -> None:
        p = self.plan.placements[token.placement]
        timer = (self.plan.settings[p.id].timers or ())[index]
        running = self._running.get(token.id)
        if (
            timer.interrupting
            and token.status is S.RUNNING
            and running is None
            and token.id not in self._starting
        ):
            # The node's code has already returned and its step is being committed: the timer
            # has not fired (a park arms it again; a move drops it).
            return
        armed = dict(token.data.get("timers", {}))
        armed.pop(str(index), None)
        token.data["timers"] = armed
        token.data["fired_timers"] = [*token.data.get("fired_timers", ()), index]
        info = {"output": timer.output, "index": index, "anchor": timer.anchor.value}
        if timer.interrupting:
            if token.status is S.RUNNING:
                token.data["interrupt"] = info
                if running is not None:
                    running[1].cancel(CancelReason.TIMER, self.clock.now())
                # else: its scope is not registered yet; it is cancelled as soon as it is.
                return
            was = token.status
            token.status = S.READY  # claimed
            self._close_park(token, ParkStatus.INTERRUPTED, f"timer:{timer.output}")
            self._expect[token.id] = Expect(was, token.epoch)
            ev = self.event(
                EventKind.TIMER_FIRED,
                token,
                data={"purpose": "timer", **info, "interrupting": True},
            )

            async def move() -> None:
                self._last = [p.id]
                nxt = await self._route(token, p, timer.output, event=ev)
                if nxt is not None:
                    self.spawn(nxt)

            self._spawn_aux(move())
            return
        self._expect[token.id] = Expect(token.status, token.epoch)
        ev = self.event(
            EventKind.TIMER_FIRED, token, data={"purpose": "timer", **info, "interrupting": False}
        )
        self._spawn_aux(self._side_tokens(token, p, timer.output, ev))

    async def _side_tokens(
        self, token: TokenRecord, p: AnyPlacement, output: str, ev: EventRecord
    ) -> None:
        """A non-interrupting timer: new tokens start on ``output``; ``token`` stays."""
        targets = p.route_map().get(output)
        if not targets:
            err = UnroutedOutputError(p.id, output, list(p.route_map()))
            await self.commit(Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True)
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(err, p.id)])
            return
        new = [self._new_token(t, token.lineage) for t in targets]
        ev.data["to"] = list(targets)
        ok = await self.commit(
            Commit(self.run.id, tokens=[token, *new], events=[ev]), unless_ended=True, token=token
        )
        if not ok:
            for t in new:
                self.tokens.pop(t.id, None)
            return
        for t in new:
            self.spawn(t)

    async def signal(
        self,
        park: ParkRecord,
        *,
        payload: Mapping[str, Any],
        output: str | None,
        idempotency_key: str | None,
    ) -> dict[str, Any]:
        """Apply a signal to ``park`` (still open in this executor); returns the answer."""
        now = self.clock.now()
        token = self.tokens.get(park.token_id)
        mine = self._parks.get(park.token_id)
        if token is None or token.status is not S.PARKED or mine is None or mine.id != park.id:
            raise refusal(self.park_record(park.id) or park, now, live=token)
        if token.deadline is not None and token.deadline <= now:
            raise refusal(mine, now)
        p = self.plan.placements[token.placement]
        if output is not None:
            invalid = invalid_output(self.plan, p, output, token.id, park)
            if invalid is not None:
                raise invalid
        epoch = token.epoch
        token.status = S.READY  # claimed
        self._close_park(token, ParkStatus.SIGNALLED, "signal")
        self._expect[token.id] = Expect(S.PARKED, epoch, alive_at=now)
        answer = signal_answer(park, output, now, idempotency_key)
        answers = [SignalAnswer(idempotency_key, self.run.id, answer)] if idempotency_key else []
        ev = self.event(
            EventKind.SIGNALLED,
            token,
            data=signalled_data(park, output, payload, idempotency_key),
        )
        base = dict(self.state)

        def update() -> tuple[dict[str, Any], list[str]]:
            return self.merger.apply(self.state, base, {}, [], payload) if payload else ({}, [])

        try:
            if output is not None:
                self._last = [p.id]
                self._route_ok = False
                nxt = await self._route(token, p, output, event=ev, update=update, answers=answers)
                if nxt is not None:
                    self.spawn(nxt)
                if self._route_ok:
                    return answer
            else:
                token.data = {k: v for k, v in token.data.items() if k in ("fired_timers",)}
                token.data["signal"] = dict(payload)
                token.epoch += 1
                ok = await self.commit(
                    Commit(
                        self.run.id,
                        tokens=[token],
                        events=[ev],
                        due_dropped=[(token.id, "timeout")],
                        signal_answers=answers,
                    ),
                    unless_ended=True,
                    update=update,
                    token=token,
                )
                if ok:
                    self.spawn(token)
                    return answer
        except StoreConflict:
            self._expect.pop(token.id, None)
            raise
        # The run ended (a cancel, a failure elsewhere) before the signal could commit.
        self._expect.pop(token.id, None)
        closed = self._recent.get(park.id) or park
        closed.status = ParkStatus.CANCELLED
        closed.closed_by = _end_reason(self._end) if self._end is not None else "run_ended"
        if closed not in self._closing:
            self._closing.append(closed)
        raise refusal(closed, now)

    # ------------------------------------------------------------------------------------------
    # placement kinds

    async def _task(self, token: TokenRecord, p: Task) -> TokenRecord | None:
        fast = self.plan.fast.get(p.id)
        if fast is not None and token.id in self._prestarted and not self.engine.hooks:
            return await self._fast_task(token, fast.task, fast)
        impl = self.plan.impls[p.id]
        settings = self.plan.settings[p.id]
        return await self._node_step(token, p, impl, settings)

    async def _fast_task(self, token: TokenRecord, p: Task, fast: FastTask) -> TokenRecord | None:
        """The fast path of plain tasks (see :class:`~flowtide.engine.plan.FastTask`) whose
        attempt was started by the commit that moved the token there, when no hook is
        registered: step after step while the token goes from plain task to plain task.

        Each step does what :meth:`_node_step`, :meth:`invoke`, :meth:`_after_attempt`,
        :meth:`_route` and :meth:`commit` do for this case, in one function: the node runs in its
        own child scope of the run's root scope (registered in ``_running``, bound to the task
        running it: this one, or the one an eager start hands a suspended branch to; so a run
        deadline or an abort cancels it as on the general path), and the
        ``node_finished`` event, the state change, the token's move and the next attempt's start
        (or the terminal reached, or, for a move to a join, the token's arrival there: what
        :meth:`_join` would commit next, when nothing is judged in between) go in one commit.
        Anything else (a failure, a cancel, a park, an output without a fast move, a move to a
        task or a terminal while joins are open, node anchors, parks to close, compare-and-set
        conditions, a parked run, a hook, a busy commit lock) is handed to the general path
        where it arises, with the same values, so the history and the state are the same
        either way. Returns what :meth:`_drive` goes on with, as a placement handler does.
        """
        # The task this runs in: another one only after an eager start handed it over.
        loop = self._loop
        task = eager_start.home or eager_start.current_task(loop)
        handoffs = eager_start.handoffs
        plan = self.plan
        running = self._running
        prestarted = self._prestarted
        starting = self._starting
        lock = self._lock
        root = self.root
        tid = token.id
        # A clock that does not watch for work outside the loop needs no hold (SystemClock).
        hold = type(self.clock).hold is not Clock.hold
        while True:
            prestarted.discard(tid)
            impl = fast.impl
            pid = p.id
            base = dict(self.state)
            # -- the attempt (invoke) --
            starting.discard(tid)
            scope = CancelScope(root, pid)
            children = root._children
            assert children is not None  # the scope is one of them
            if scope.cancellation is not None:
                scope.close()
                attempt = Attempt("cancelled", cancellation=scope.cancellation)
                return await self._after_attempt(
                    token, p, impl.id, plan.settings[pid], base, attempt, eager=True
                )
            state = copy_state(base) if base else {}
            # NodeContext(state, run_id, ...), without the call's frame.
            ctx = _new_context(NodeContext)
            ctx.state = state
            ctx.run_id = self.run.id
            ctx.placement = pid
            ctx.attempt = token.attempt
            ctx.visit = token.visit
            ctx.item = self.item
            ctx.clock = self.clock
            ctx._scope = scope
            ctx.signal = None
            value: Any = None
            error: BaseException | None = None
            running[tid] = (pid, scope)
            try:
                # ``with scope.bind():``, spelled out (see CancelScope.bind). The scope is
                # bound to the task running this step; when the step was started eagerly and the
                # node suspends, it is bound to the task that takes over (_start_branches), so
                # the task to release is the one bound at the end.
                if eager_start.handoffs != handoffs:
                    task = eager_start.current_task(loop)
                    handoffs = eager_start.handoffs
                scope._task = task
                try:
                    try:
                        if impl.is_async:
                            value = await impl.fn(ctx)
                        elif fast.threaded:
                            if hold:
                                with self.clock.hold():
                                    value = await self.engine.threads.submit(impl.fn, ctx, loop)
                            else:
                                value = await self.engine.threads.submit(impl.fn, ctx, loop)
                        else:
                            value = impl.fn(ctx)
                    except Exception as exc:
                        error = exc
                    except Cancelled:
                        pass
                except asyncio.CancelledError:
                    bound = scope._task
                    scope._task = None
                    if bound is None or not scope._release(bound):
                        raise
                    scope.cancelled_caught = True
                else:
                    bound = scope._task
                    scope._task = None
                    if scope._cancelled_by_us and bound is not None:
                        scope._release(bound)
                    scope.cancelled_caught = scope.cancellation is not None
            finally:
                scope._task = None
                children.discard(scope)  # scope.close(), inline
                running.pop(tid, None)
            if scope.cancellation is not None:
                attempt = Attempt("cancelled", cancellation=scope.cancellation)
                return await self._after_attempt(
                    token, p, impl.id, plan.settings[pid], base, attempt, eager=True
                )
            if error is not None:
                attempt = Attempt("error", error=error)
                return await self._after_attempt(
                    token, p, impl.id, plan.settings[pid], base, attempt, eager=True
                )
            update: Mapping[str, Any] = _NO_UPDATE
            if value is None and fast.only is not None:
                name = fast.only
            elif type(value) is str and value in fast.outputs:
                name = value
            else:
                try:
                    name, update, park = self._interpret(impl, pid, value, state)
                except UndeclaredOutputError as exc:
                    attempt = Attempt("error", error=exc)
                    return await self._after_attempt(
                        token, p, impl.id, plan.settings[pid], base, attempt, eager=True
                    )
                if park is not None:
                    attempt = Attempt("park", state=state, update=update, park=park)
                    return await self._after_attempt(
                        token, p, impl.id, plan.settings[pid], base, attempt, eager=True
                    )
            # -- the move (_after_attempt, _route, commit) --
            if self._end is not None or token.status is S.CANCELLED:
                return None
            move = fast.moves.get(name)
            if (
                move is None
                or token.data
                or (self._joins and not move.join)
                or self._anchors
                or self._closing
                or self._expect
                or tid in self._parks
                or self._closed
                or self.run.lifecycle == _PARKED
                or self.engine.hooks
                or lock._busy  # lock.try_acquire(), inline
                or lock._waiters
            ):
                ok = Attempt("ok", output=name, state=state, update=update)
                ev = self.event(EventKind.NODE_FINISHED, token, data={"output": name})
                self._last = [pid]
                return await self._route(
                    token,
                    p,
                    name,
                    event=ev,
                    update=functools.partial(self.state_update, base, ok),
                    eager=True,
                )
            lock._busy = True
            try:
                self._last = [pid]
                run_id = self.run.id
                now = self._now()
                target = move.target
                # EventRecord("node_finished", ...), without the call's frame.
                finished = _new_record(EventRecord)
                finished.kind = "node_finished"
                finished.run_id = run_id
                finished.at = now
                finished.placement = pid
                finished.attempt = token.attempt
                finished.token_id = tid
                finished.data = {"output": name, "to": [target]}
                finished.seq = 0
                events = [finished]
                token.epoch += 1
                token.placement = target
                visit = self._visits.get(target, 0) + 1
                self._visits[target] = visit
                token.visit = visit
                token.attempt = 1
                token.deadline = None
                token.due = None
                if move.node is not None:
                    token.status = S.RUNNING
                    starting.add(tid)
                    # EventRecord("node_started", ...), without the call's frame.
                    begun = _new_record(EventRecord)
                    begun.kind = "node_started"
                    begun.run_id = run_id
                    begun.at = now
                    begun.placement = target
                    begun.attempt = 1
                    begun.token_id = tid
                    begun.data = {"visit": visit, "node": move.node, "deadline": None}
                    begun.seq = 0
                    events.append(begun)
                elif move.join:
                    # The token arrives at the join in the same commit, as _join records
                    # it (nothing is evaluated between the move and the arrival).
                    arrival = self._arrive_unnoted(token, target) if token.lineage else None
                    if arrival is not None:
                        # EventRecord("join_arrived", ...), without the call's frame.
                        arrived = _new_record(EventRecord)
                        arrived.kind = "join_arrived"
                        arrived.run_id = run_id
                        arrived.at = now
                        arrived.placement = target
                        arrived.attempt = 1
                        arrived.token_id = tid
                        arrived.data = arrival
                        arrived.seq = 0
                        events.append(arrived)
                    else:
                        token.status = S.READY  # it arrives at the join in the next step
                else:
                    token.status = S.DONE
                    data = {"outcome": move.outcome}
                    events.append(
                        EventRecord("terminal_reached", run_id, now, target, 1, tid, data)
                    )
                c = Commit(run_id, None, [token], None, (), events)
                if base or state or update:
                    changed, deleted = self.merger.changes(base, state)
                    if changed or deleted or update:
                        written, removed = self.merger.apply(
                            self.state, base, changed, deleted, update
                        )
                        if written:
                            c.state = written
                        if removed:
                            c.state_deleted = removed
                # It has events: its last seq is read when needed (_last_seq).
                self._stored = await self.engine.store.commit(c)
            finally:
                if lock._waiters:
                    lock._handoff()
                else:
                    lock._busy = False  # lock.release(), inline
            self._route_ok = True
            if move.join:
                if token.status is S.ARRIVED:
                    # What _join does after its commit, when judging can change anything: a
                    # group has what it needs, or is to be judged again (``dirty``). Otherwise
                    # _evaluate_joins would pass over every group, as it does after each
                    # arrival at an ``all`` join until the last one.
                    if self._end is None:
                        needs = plan.join_needs
                        for group in self._joins.values():
                            if (
                                group.dirty
                                or group.fired
                                or len(group.branches) >= (needs.get(group.join) or group.count)
                            ):
                                await self._evaluate_joins()
                                break
                    return None
                # What _route does after a move to a join, then back to _drive, which goes on
                # to _join.
                if self._joins and self._note_moves((token,)):
                    await self._evaluate_joins()
                return token
            if move.node is None:
                self.tokens.pop(tid, None)
                self._terminals.append(target)
                if self._outcome is None:
                    self._outcome = move.outcome
                return None
            prestarted.add(tid)
            # What _drive and _task check before the next step.
            if self._end is not None or token.status is S.CANCELLED:
                return None
            p_next = plan.placements[target]
            fast_next = plan.fast.get(target)
            if fast_next is None or self.engine.hooks or not isinstance(p_next, Task):
                return token
            p, fast = p_next, fast_next

    async def _phase_in_flow(self, token: TokenRecord, p: Phase) -> TokenRecord | None:
        # A phase reached by a route (validation should prevent it): run it like a dead end.
        self._last.append(p.id)
        token.status = S.DONE
        self.tokens.pop(token.id, None)
        await self.commit(Commit(self.run.id, tokens=[token]), unless_ended=True)
        if self._joins and self._note_moves([token], ended=True):
            await self._evaluate_joins()
        return None

    async def _node_step(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        impl: NodeImplementation,
        settings: NodeSettings,
    ) -> TokenRecord | None:
        signal = None
        if token.id in self._prestarted:
            # The commit that moved the token here also started this attempt.
            self._prestarted.discard(token.id)
        else:
            fired = token.data.pop("fired", None)
            signal = token.data.pop("signal", None)
            events = []
            if fired == "retry":
                events.append(self.event(EventKind.TIMER_FIRED, token, data={"purpose": "retry"}))
            started, anchors, due = self._start(token, p.id, impl, settings)
            events.append(started)
            if not await self.commit(
                Commit(self.run.id, tokens=[token], events=events, anchors=anchors, due=due),
                unless_ended=True,
            ):
                self._starting.discard(token.id)
                return None
        base = dict(self.state)
        attempt = await self.invoke(
            impl,
            settings,
            p.id,
            base,
            parent=self.root,
            key=token.id,
            attempt=token.attempt,
            visit=token.visit,
            token=token,
            deadline=token.deadline,
            signal=signal,
        )
        return await self._after_attempt(token, p, impl.id, settings, base, attempt, eager=True)

    def _start(
        self, token: TokenRecord, placement: str, impl: NodeImplementation, settings: NodeSettings
    ) -> tuple[EventRecord, list[NodeAnchor], list[DueEntry]]:
        """Mark ``token`` running an attempt at ``placement``: its window and timers armed, its
        ``node_started`` event (what the attempt's start commit carries)."""
        token.status = S.RUNNING
        self._starting.add(token.id)
        now = self.clock.now()
        if placement in self.plan.unarmed:
            token.deadline = None  # the common case: no window, no timers
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            when = None
        else:
            anchors, due = self._arm(token, placement, settings, now)
            deadline = token.deadline
            when = isoformat(deadline) if deadline is not None else None
        started = EventRecord(
            "node_started",
            self.run.id,
            now,
            placement,
            token.attempt,
            token.id,
            {"visit": token.visit, "node": impl.id, "deadline": when},
        )
        return started, anchors, due

    async def _after_attempt(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
        eager: bool = False,
    ) -> TokenRecord | None:
        """What follows a finished attempt; ``eager``: see :meth:`_route`."""
        if self._end is not None or token.status is S.CANCELLED:
            return None
        if attempt.kind == "cancelled":
            interrupt = token.data.pop("interrupt", None)
            c = attempt.cancellation
            if interrupt is not None and c is not None and c.reason is CancelReason.TIMER:
                ev = self.event(
                    EventKind.TIMER_FIRED,
                    token,
                    data={"purpose": "timer", **interrupt, "interrupting": True},
                )
                self._last = [p.id]
                return await self._route(token, p, interrupt["output"], event=ev, eager=eager)
            return None
        if attempt.kind == "park":
            return await self._park(token, p, node_id, settings, base, attempt, eager)
        if attempt.kind == "ok":
            assert attempt.output is not None
            ev = self.event(EventKind.NODE_FINISHED, token, data={"output": attempt.output})
            self._last = [p.id]
            return await self._route(
                token,
                p,
                attempt.output,
                event=ev,
                update=lambda: self.state_update(base, attempt),
                eager=eager,
            )
        if attempt.kind == "timeout":
            budget = settings.timeout
            assert budget is not None and attempt.deadline is not None
            timeout_err = NodeTimeoutError(node_id, p.id, budget)
            routed = TIMEOUT_OUTPUT in p.route_map()
            ev = self.event(
                EventKind.NODE_TIMED_OUT,
                token,
                data=timed_out_data(budget, attempt.deadline, routed),
            )
            if self._retry(token, settings, timeout_err, explicit_only=True):
                await self._schedule_retry(token, settings, timeout_err, ev)
                return None
            if routed:
                self._last = [p.id]
                return await self._route(token, p, TIMEOUT_OUTPUT, event=ev, eager=eager)
            token.status = S.FAILED
            if not await self.commit(
                Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True
            ):
                return None
            self._fail_token(
                token, timeout_err, InterruptedAt("timeout", p.id, attempt.deadline, (p.id,))
            )
            return None
        exc = attempt.error
        assert exc is not None
        ev = self.event(
            EventKind.NODE_FAILED,
            token,
            data={"error": {"type": type(exc).__name__, "message": str(exc)}},
        )
        if not isinstance(exc, UndeclaredOutputError) and self._retry(token, settings, exc):
            await self._schedule_retry(token, settings, exc, ev)
            return None
        token.status = S.FAILED
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        self._fail_token(token, exc)
        return None

    def _retry(
        self,
        token: TokenRecord,
        settings: NodeSettings,
        exc: BaseException,
        explicit_only: bool = False,
    ) -> bool:
        policy = settings.retry
        if policy is None:
            return False
        if explicit_only and not (policy.retry_on and matches_retry_on(exc, policy.retry_on)):
            return False
        return should_retry(policy, exc, token.attempt)

    async def _schedule_retry(
        self, token: TokenRecord, settings: NodeSettings, exc: BaseException, ev: EventRecord
    ) -> None:
        policy = settings.retry
        assert policy is not None
        from datetime import timedelta

        prev = token.data.get("backoff")
        delay = backoff_delay(
            policy,
            token.attempt,
            previous=timedelta(seconds=prev) if prev is not None else None,
            rng=self.engine.random,
        )
        due = self.clock.now() + delay
        failed_attempt = token.attempt
        token.attempt += 1
        token.status = S.WAITING
        token.due = due
        token.deadline = None
        token.data = {"purpose": "retry", "backoff": delay.total_seconds()}
        retried = self.event(
            EventKind.NODE_RETRIED,
            token,
            attempt=failed_attempt,
            data={
                "due": isoformat(due),
                "next_attempt": token.attempt,
                "delay": delay.total_seconds(),
                "error": type(exc).__name__,
            },
        )
        if await self.commit(
            Commit(
                self.run.id,
                tokens=[token],
                events=[ev, retried],
                due=[DueEntry(due, self.run.id, token.id)],
            ),
            unless_ended=True,
        ):
            self.engine.scheduler.wake(due)

    async def _wait(self, token: TokenRecord, p: Wait) -> TokenRecord | None:
        if token.data.get("fired") == "wait":
            ev = self.event(EventKind.TIMER_FIRED, token, data={"purpose": "wait"})
            self._last = [p.id]
            return await self._route(token, p, "elapsed", event=ev, eager=True)
        now = self.clock.now()
        due = p.until if p.until is not None else now + (p.duration or (now - now))
        token.status = S.WAITING
        token.due = due
        token.data = {"purpose": "wait"}
        if await self.commit(
            Commit(
                self.run.id,
                tokens=[token],
                events=[self.event(EventKind.WAIT_STARTED, token, data={"due": isoformat(due)})],
                due=[DueEntry(due, self.run.id, token.id)],
            ),
            unless_ended=True,
        ):
            self.engine.scheduler.wake(due)
        return None

    async def _terminal(self, token: TokenRecord, p: Terminal) -> TokenRecord | None:
        token.status = S.DONE
        self.tokens.pop(token.id, None)
        ev = self.event(EventKind.TERMINAL_REACHED, token, data={"outcome": p.outcome})
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        self._terminals.append(p.id)
        if p.fails:
            self._request_end(Lifecycle.FAILED, [ErrorInfo.of(FailedTerminalError(p.id))])
        elif self._outcome is None:
            self._outcome = p.outcome
        if self._joins and self._note_moves([token], ended=True):
            await self._evaluate_joins()
        return None

    # ------------------------------------------------------------------------------------------
    # joins

    async def _join(self, token: TokenRecord, p: Join) -> TokenRecord | None:
        if not token.lineage:
            ev = self.event(EventKind.JOIN_FIRED, token, data={"output": "success", "arrived": 1})
            return await self._route(token, p, "success", event=ev, eager=True)
        ev = self.event(EventKind.JOIN_ARRIVED, token, data=self._arrive(token, p.id))
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        await self._evaluate_joins()
        return None

    def _arrive(self, token: TokenRecord, join: str) -> dict[str, Any]:
        """Count ``token`` (with a lineage) as arrived at ``join`` in its innermost split's group;
        returns the ``join_arrived`` event's data."""
        split, branch, count = token.lineage[-1]
        group = self._joins.get((join, split))
        if group is None:
            group = self._joins[(join, split)] = _JoinGroup(join, split, count)
        token.status = S.ARRIVED
        group.arrived.append(token)
        group.branches.add(branch)
        return {"branch": branch, "split": split}

    def _arrive_unnoted(self, token: TokenRecord, join: str) -> dict[str, Any] | None:
        """:meth:`_arrive` at ``join`` (``token`` moved there), unless :meth:`_note_moves`
        would mark a join group for that move (it changes nothing then, and returns None)."""
        reach = self.plan.reach
        lineage = token.lineage
        joins = self._joins
        for group in joins.values():
            if group.fired:
                continue
            split = group.split
            for frame in lineage:
                if frame[0] == split:
                    break
            else:
                continue
            there = group.join
            if group.dirty or not (join == there or there in reach.get(join, ())):
                return None
        split, branch, count = lineage[-1]
        mine = joins.get((join, split))
        if mine is None:
            mine = joins[(join, split)] = _JoinGroup(join, split, count)
        token.status = S.ARRIVED
        mine.arrived.append(token)
        mine.branches.add(branch)
        return {"branch": branch, "split": split}

    def _expect_joins(
        self,
        split: str,
        count: int,
        lineage: tuple[tuple[str, int, int], ...],
        placements: Sequence[str],
    ) -> None:
        """Open an (empty) join group for every join the branches of ``split`` may arrive at,
        so that a join none of them reaches routes ``empty`` once none can arrive any more."""
        for join in self.plan.joins_of(placements):
            if (join, split) not in self._joins:
                self._joins[(join, split)] = _JoinGroup(
                    join, split, count, dirty=False, lineage=lineage
                )

    def _note_moves(self, tokens: Sequence[TokenRecord], ended: bool = False) -> bool:
        """Mark join groups that may have lost a branch through these tokens; True if any."""
        hit = False
        for group in self._joins.values():
            if group.fired:
                continue
            for t in tokens:
                if first_branch(t, group.split) < 0:
                    continue
                if group.dirty:
                    hit = True  # already to be judged again: this move may settle it
                    break
                if ended or not (
                    t.placement == group.join or self.plan.can_reach(t.placement, group.join)
                ):
                    group.dirty = hit = True
                    break
        return hit

    async def _evaluate_joins(self) -> None:
        for key, group in list(self._joins.items()):
            if group.fired or self._end is not None:
                continue
            p = self.plan.placements[group.join]
            assert isinstance(p, Join)
            branches = group.branches
            need = self.plan.join_needs.get(group.join) or group.count
            if len(branches) >= need:
                output = "success"
            elif not group.dirty:
                continue
            else:
                group.dirty = False
                arrived_ids = {t.id for t in group.arrived}
                pending_branches = {
                    first_branch(t, group.split)
                    for t in self.tokens.values()
                    if t.id not in arrived_ids
                    and first_branch(t, group.split) >= 0
                    and (t.placement == group.join or self.plan.can_reach(t.placement, group.join))
                } - branches
                if not branches:
                    if pending_branches:
                        group.dirty = True  # judged again when one arrives
                        continue
                    output = "empty"
                elif len(branches) + len(pending_branches) >= need:
                    continue
                else:
                    output = "error"
            group.fired = True
            del self._joins[key]
            if output == "empty" and output not in p.route_map():
                continue  # nothing arrived and nothing routes it: the branches ended elsewhere
            await self._fire_join(group, p, output)

    async def _fire_join(self, group: _JoinGroup, p: Join, output: str) -> None:
        for key, other in list(self._joins.items()):
            if other.split == group.split and not other.arrived:
                del self._joins[key]  # the split is joined: its other joins expect nothing
        arrived = group.arrived
        if not arrived:
            # No branch arrived, and none can any more: a token leaves the join by ``empty``.
            arrived = [self._new_token(p.id, group.lineage)]
        losers: list[TokenRecord] = []
        if p.mode is not JoinMode.ALL:
            ids = {t.id for t in arrived}
            losers = [
                t
                for t in self.tokens.values()
                if t.id not in ids and first_branch(t, group.split) >= 0
            ]
        extra_events = []
        for t in losers:
            self._kill(t, CancelReason.JOIN_LOSER)
            extra_events.append(
                self.event(
                    EventKind.TOKEN_CANCELLED,
                    t,
                    data={"reason": CancelReason.JOIN_LOSER.value, "join": p.id},
                )
            )
        came = group.arrived
        first = arrived[0]
        for t in arrived[1:]:
            t.status = S.DONE
            self.tokens.pop(t.id, None)
        cont = first
        cont.lineage = tuple(f for f in cont.lineage if f[0] != group.split)
        ev = self.event(
            EventKind.JOIN_FIRED,
            cont,
            data={
                "output": output,
                "arrived": len(came),
                "branches": _branches(came, group.split),
            },
        )
        nxt = await self._route(
            cont,
            p,
            output,
            event=ev,
            extra=[*arrived[1:], *losers],
            extra_events=extra_events,
            due_cleared=[t.id for t in losers],
        )
        if nxt is not None:
            self.spawn(nxt)
        if self._joins:
            await self._evaluate_joins()

    def _kill(self, t: TokenRecord, reason: CancelReason) -> None:
        """Cancel a live token: its running code (if any) and its pending due instant."""
        t.status = S.CANCELLED
        t.due = None
        t.epoch += 1
        self._close_park(t, ParkStatus.CANCELLED, reason.value)
        self.tokens.pop(t.id, None)
        self._note_moves([t], ended=True)
        running = self._running.get(t.id)
        if running is not None:
            running[1].cancel(reason, self.clock.now())
        for key, (_, scope) in list(self._running.items()):
            if key.startswith(t.id + "/"):
                scope.cancel(reason, self.clock.now())

    # ------------------------------------------------------------------------------------------
    # scatter, subflow, phases

    async def _scatter(self, token: TokenRecord, p: Scatter) -> TokenRecord | None:
        from flowtide.engine.scatter import ScatterRun

        token.status = S.RUNNING
        started = self.event(
            EventKind.NODE_STARTED, token, data={"visit": token.visit, "scatter": True}
        )
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[started]), unless_ended=True
        ):
            return None
        base = dict(self.state)
        runner = ScatterRun(self, token, p)
        output, update = await runner.run(base)
        if output is None or self._end is not None or token.status is S.CANCELLED:
            return None
        ev = self.event(EventKind.NODE_FINISHED, token, data={"output": output, **runner.summary()})
        self._last = [p.id]
        return await self._route(
            token,
            p,
            output,
            event=ev,
            update=lambda: self.merger.apply(self.state, base, {}, [], update),
            eager=True,
        )

    async def _subflow(self, token: TokenRecord, p: Subflow) -> TokenRecord | None:
        settings = self.plan.settings[p.id]
        token.status = S.RUNNING
        self._starting.add(token.id)
        anchors, due = self._arm(token, p.id, settings, self.clock.now())
        started = self.event(
            EventKind.NODE_STARTED, token, data={"visit": token.visit, "subflow": p.flow}
        )
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[started], anchors=anchors, due=due),
            unless_ended=True,
        ):
            return None
        base = dict(self.state)
        child_state = map_input(base, p.input)
        attempt, result = await self.run_child(
            p.id,
            p.flow,
            child_state,
            settings,
            key=token.id,
            item=None,
            token=token,
            deadline=token.deadline,
        )
        if attempt.kind != "ok" or result is None:
            return await self._after_attempt(token, p, p.flow, settings, base, attempt, eager=True)
        fin = self.event(
            EventKind.SUBFLOW_FINISHED,
            token,
            data={
                "child": result.run_id,
                "lifecycle": result.lifecycle.value,
                "outcome": result.outcome,
            },
        )
        if result.lifecycle is Lifecycle.COMPLETED:
            update = map_output(result.state, p.output, self.state)
            fin.data["output"] = "success"
            self._last = [p.id]
            return await self._route(
                token,
                p,
                "success",
                event=fin,
                update=lambda: self.merger.apply(self.state, base, {}, [], update),
                eager=True,
            )
        fin.data["output"] = "error"
        if "error" in p.route_map():
            self._last = [p.id]
            return await self._route(token, p, "error", event=fin, eager=True)
        await self.commit(Commit(self.run.id, events=[fin]), unless_ended=True)
        message = result.errors[0].message if result.errors else result.lifecycle.value
        own = SubflowFailedError(p.id, result.run_id, result.lifecycle.value, message)
        token.status = S.FAILED
        self.tokens.pop(token.id, None)
        self._request_end(Lifecycle.FAILED, [*result.errors, ErrorInfo.of(own, p.id)])
        return None

    async def run_child(
        self,
        placement: str,
        flow_id: str,
        state: dict[str, Any],
        settings: NodeSettings,
        *,
        key: str,
        item: Any,
        token: TokenRecord | None,
        parent: CancelScope | None = None,
        deadline: datetime | None = _COMPUTE,
    ) -> tuple[Attempt, RunResult | None]:
        """Run ``flow_id`` as a child run in a child scope bounded by ``settings``' window
        (``deadline``: already resolved by the caller)."""
        depth = self.run.depth + 1
        if depth > self.flow.max_depth:
            err = RecursionDepthError(placement, flow_id, self.flow.max_depth)
            return Attempt("error", error=err), None
        now = self.clock.now()
        if token is not None and self._interrupted_before_start(token):
            cancelled = Cancellation(CancelReason.TIMER, now, placement)
            return Attempt("cancelled", cancellation=cancelled), None
        if deadline is _COMPUTE:
            deadline = attempt_deadline(settings, now=now, run_created_at=self.run.created_at)
        if deadline is not None and deadline <= now:
            return Attempt("timeout", deadline=deadline), None
        scope = (parent or self.root).child(placement)
        window = ScopeDeadline(self.clock, scope, deadline)
        self._running[key] = (placement, scope)
        try:
            child = await self.engine._start_child(self, flow_id, state, scope, token, item)
            if token is not None:
                await self.commit(
                    Commit(
                        self.run.id,
                        events=[
                            self.event(
                                EventKind.SUBFLOW_STARTED, token, data={"child": child.run.id}
                            )
                        ],
                    ),
                    unless_ended=True,
                )
            result = await asyncio.shield(child.done)
        except Exception as exc:
            return Attempt("error", error=exc), None
        finally:
            window.disarm()
            scope.close()
            self._running.pop(key, None)
        if scope.cancellation is not None:
            if window.fired:
                return Attempt("timeout", deadline=deadline), result
            return Attempt("cancelled", cancellation=scope.cancellation), result
        return Attempt("ok", output="success"), result

    async def _run_phase(self, phase: Phase, *, post: bool = False) -> ErrorInfo | None:
        impl = self.plan.impls[phase.id]
        settings = self.plan.settings[phase.id]
        token = TokenRecord(
            id=f"{self.run.id}.{next(self._ids)}",
            run_id=self.run.id,
            placement=phase.id,
            status=S.RUNNING,
            visit=self._next_visit(phase.id),
            created_at=self.clock.now(),
        )
        base = dict(self.state)
        token.deadline = attempt_deadline(
            settings, now=self.clock.now(), run_created_at=self.run.created_at
        )
        await self.commit(
            Commit(
                self.run.id,
                tokens=[token],
                events=[
                    self.event(
                        EventKind.NODE_STARTED,
                        token,
                        data={"visit": token.visit, "phase": phase.phase.value, "node": impl.id},
                    )
                ],
            )
        )
        scope = CancelScope(None) if post else self.root
        attempt = await self.invoke(
            impl,
            settings,
            phase.id,
            base,
            parent=scope,
            key=token.id,
            attempt=1,
            visit=token.visit,
            token=token,
        )
        token.status = S.DONE
        if attempt.kind == "ok":
            written, removed = self.state_update(base, attempt)
            await self.commit(
                Commit(
                    self.run.id,
                    tokens=[token],
                    state=written or None,
                    state_deleted=removed,
                    events=[
                        self.event(EventKind.NODE_FINISHED, token, data={"output": attempt.output})
                    ],
                )
            )
            return None
        if attempt.kind == "cancelled":
            return None
        token.status = S.FAILED
        if attempt.kind == "timeout":
            assert settings.timeout is not None
            exc: BaseException = NodeTimeoutError(impl.id, phase.id, settings.timeout)
            ev = self.event(
                EventKind.NODE_TIMED_OUT,
                token,
                data={"budget": settings.timeout.total_seconds(), "routed": False},
            )
        else:
            assert attempt.error is not None
            exc = attempt.error
            ev = self.event(
                EventKind.NODE_FAILED,
                token,
                data={"error": {"type": type(exc).__name__, "message": str(exc)}},
            )
        await self.commit(Commit(self.run.id, tokens=[token], events=[ev]))
        if post:
            return ErrorInfo.of(exc, phase.id)
        pre = PrePhaseError(phase.id, f"{type(exc).__name__}: {exc}")
        return ErrorInfo(type(exc).__name__, str(pre), phase.id)

    # ------------------------------------------------------------------------------------------
    # resume

    def restore(self, tokens: Sequence[TokenRecord], history: Sequence[EventRecord]) -> None:
        """Rebuild in-memory bookkeeping from stored tokens and history (before resuming):
        ``history`` is what follows the run's resume checkpoint (all of it without one)."""
        self._started = True
        self._stored = None
        top = 0
        checkpoint = self.run.checkpoint
        if checkpoint is not None:
            self._seq = checkpoint.seq
            self._visits.update(checkpoint.visits)
            self._terminals.extend(checkpoint.terminals)
            self._outcome = checkpoint.outcome
        if history:
            self._seq = history[-1].seq
        for e in history:
            if e.kind == EventKind.NODE_STARTED and e.placement is not None:
                visit = e.data.get("visit")
                if isinstance(visit, int):
                    self._visits[e.placement] = max(self._visits.get(e.placement, 0), visit)
            if e.kind == EventKind.TERMINAL_REACHED and e.placement is not None:
                self._terminals.append(e.placement)
                if self._outcome is None and e.data.get("outcome") != "failed":
                    self._outcome = e.data.get("outcome")
        for t in tokens:
            suffix = t.id.rpartition(".")[2]
            if suffix.isdigit():
                top = max(top, int(suffix))
            if not t.status.live:
                continue
            self.tokens[t.id] = t
            self._visits[t.placement] = max(self._visits.get(t.placement, 0), t.visit)
            if t.status is S.ARRIVED and t.lineage:
                split, _, count = t.lineage[-1]
                group = self._joins.setdefault(
                    (t.placement, split), _JoinGroup(t.placement, split, count)
                )
                group.arrived.append(t)
                group.branches.add(first_branch(t, split))
        for t in self.tokens.values():
            if t.status is not S.ARRIVED and t.lineage:
                split, _, count = t.lineage[-1]
                for join in self.plan.joins_from(t.placement):
                    self._joins.setdefault(
                        (join, split), _JoinGroup(join, split, count, lineage=t.lineage[:-1])
                    )
        self._ids = itertools.count(top + 1)

    async def load_extras(self) -> None:
        """Read the run's node anchors and open parks from the store (before resuming)."""
        store = self.engine.store
        if self.plan.anchored:  # (a run of a flow without node anchors has none stored)
            for anchor in await store.node_anchors(self.run.id):
                self._anchors[(anchor.placement, anchor.item)] = anchor.at
        for park in await store.parks(run_id=self.run.id, open_only=True):
            token = self.tokens.get(park.token_id)
            if token is not None and token.status is S.PARKED and token.epoch == park.epoch:
                self._parks[park.token_id] = park

    def resume_tokens(self) -> list[DueEntry]:
        """Start driving restored tokens; returns the due entries to re-arm."""
        dues = []
        for t in list(self.tokens.values()):
            if t.status in (S.READY, S.RUNNING):
                t.status = S.READY
                self.spawn(t)
            elif t.status is S.WAITING and t.due is not None:
                dues.append(DueEntry(t.due, self.run.id, t.id))
        self._arm_deadline()
        return dues


_Handler = Callable[[RunExecutor, TokenRecord, Any], Awaitable[TokenRecord | None]]
_HANDLERS: dict[str, _Handler] = {
    "task": RunExecutor._task,
    "wait": RunExecutor._wait,
    "join": RunExecutor._join,
    "scatter": RunExecutor._scatter,
    "subflow": RunExecutor._subflow,
    "terminal": RunExecutor._terminal,
    "phase": RunExecutor._phase_in_flow,
}
"""What drives a token at each kind of placement (one table per process, not per run)."""


def refusal(park: ParkRecord, now: datetime, live: TokenRecord | None = None) -> SignalRefused:
    """Why a signal for ``park`` cannot apply (``live``: the token as it is now, if known)."""
    from flowtide.engine.errors import format_gap, format_instant

    where = f"token {park.token_id} at {park.placement!r}"
    common: dict[str, Any] = {
        "run_id": park.run_id,
        "placement": park.placement,
        "token_id": park.token_id,
        "key": park.key,
    }
    expired = park.status is ParkStatus.TIMED_OUT or (
        park.status is ParkStatus.PARKED and park.deadline is not None and park.deadline <= now
    )
    if expired and park.deadline is not None:
        return SignalRefused(
            RefusalReason.EXPIRED,
            f"signal refused: {where} expired at {format_instant(park.deadline, now)}, "
            f"{format_gap(now - park.deadline)} before this signal",
            at=park.deadline,
            **common,
        )
    at = park.closed_at
    when = f" at {format_instant(at, now)}" if at is not None else ""
    if park.status is ParkStatus.CANCELLED:
        return SignalRefused(
            RefusalReason.CANCELLED,
            f"signal refused: {where} was cancelled{when} ({park.closed_by or 'cancelled'})",
            at=at,
            **common,
        )
    if park.status in (ParkStatus.SIGNALLED, ParkStatus.INTERRUPTED):
        by = "an escalation timer" if park.status is ParkStatus.INTERRUPTED else "a signal"
        return SignalRefused(
            RefusalReason.MOVED_ON,
            f"signal refused: {where} already moved on{when}, by {by}",
            at=at,
            **common,
        )
    state = live.status.value if live is not None else "gone"
    return SignalRefused(
        RefusalReason.NOT_PARKED,
        f"signal refused: {where} is not parked (it is {state})",
        **common,
    )


def invalid_output(
    plan: FlowPlan, p: AnyPlacement, output: str, token_id: str, park: ParkRecord
) -> SignalRefused | None:
    """Why a signal may not take ``output`` at ``p`` (None: it may)."""
    impl = plan.impls.get(p.id)
    declared = impl.outputs if impl is not None else p.fixed_outputs
    if output in RESERVED_OUTPUTS or output not in declared:
        return SignalRefused(
            RefusalReason.INVALID_OUTPUT,
            f"signal refused: output {output!r} is not one node at {p.id!r} declares "
            f"(declared: {', '.join(declared)})",
            run_id=park.run_id,
            placement=p.id,
            token_id=token_id,
            key=park.key,
        )
    if output not in p.route_map():
        return SignalRefused(
            RefusalReason.INVALID_OUTPUT,
            f"signal refused: placement {p.id!r} does not route output {output!r}",
            run_id=park.run_id,
            placement=p.id,
            token_id=token_id,
            key=park.key,
        )
    return None


def signal_answer(
    park: ParkRecord, output: str | None, now: datetime, idempotency_key: str | None
) -> dict[str, Any]:
    """The answer to an accepted signal (what a repeat with its idempotency key gets)."""
    return {
        "run_id": park.run_id,
        "token_id": park.token_id,
        "placement": park.placement,
        "output": output,
        "at": isoformat(now),
        "park": park.id,
        "idempotency_key": idempotency_key,
    }


def signalled_data(
    park: ParkRecord, output: str | None, payload: Mapping[str, Any], idempotency_key: str | None
) -> dict[str, Any]:
    """The data of a ``signalled`` event (a move adds ``to``)."""
    return {
        "output": output,
        "idempotency_key": idempotency_key,
        "keys": sorted(payload),
        "park": park.id,
    }


def timed_out_data(budget: timedelta, deadline: datetime, routed: bool) -> dict[str, Any]:
    """The data of a ``node_timed_out`` event (a move adds ``to``)."""
    return {"budget": budget.total_seconds(), "deadline": isoformat(deadline), "routed": routed}


def move_token(token: TokenRecord, target: str, visit: int) -> None:
    """``token`` leaves its placement for ``target`` (a single target): a fresh attempt there."""
    token.epoch += 1
    token.placement = target
    token.visit = visit
    token.attempt = 1
    token.status = S.READY
    token.deadline = None
    token.due = None
    token.data = {}


def terminal_event(run_id: str, at: datetime, token: TokenRecord, q: Terminal) -> EventRecord:
    """``terminal_reached`` for ``token``, which has moved to ``q``."""
    return EventRecord(
        "terminal_reached", run_id, at, q.id, token.attempt, token.id, {"outcome": q.outcome}
    )


def end_result(
    run_id: str,
    lifecycle: Lifecycle,
    state: dict[str, Any],
    terminals: Sequence[str],
    outcome: str | None,
    *,
    errors: Sequence[ErrorInfo] = (),
    interrupted: InterruptedAt | None = None,
    warnings: Sequence[str] = (),
) -> RunResult:
    """A run's result at its end (``outcome``: of the first terminal reached, if any)."""
    if lifecycle is not Lifecycle.COMPLETED:
        failed = lifecycle is Lifecycle.FAILED and terminals and outcome is None
        outcome = "failed" if failed else None
    return run_result(
        run_id,
        lifecycle,
        outcome,
        state,
        tuple(errors),
        interrupted,
        (),
        tuple(warnings),
        tuple(terminals),
    )


def finish(run: RunRecord, result: RunResult, now: datetime) -> EventRecord:
    """Record ``result`` on ``run`` (lifecycle, end instant, outcome, result) and return the
    ``run_finished`` event."""
    run.lifecycle = transition(run.lifecycle, result.lifecycle)._value_
    run.finished_at = now
    run.outcome = result.outcome
    run.result = result.to_dict()
    return EventRecord(
        "run_finished",
        run.id,
        now,
        None,
        None,
        None,
        {
            "lifecycle": result.lifecycle._value_,
            "outcome": result.outcome,
            "errors": [e.to_dict() for e in result.errors],
        },
    )


def _end_reason(end: _End) -> str:
    if end.lifecycle is Lifecycle.CANCELLED:
        return "run_cancelled"
    if end.lifecycle is Lifecycle.TIMED_OUT:
        return "run_deadline"
    return "run_ended"


def _branches(tokens: Sequence[TokenRecord], split: str) -> list[int]:
    """:func:`first_branch` of each token (a join's arrivals), in one call."""
    out = []
    for t in tokens:
        for f in t.lineage:
            if f[0] == split:
                out.append(f[1])
                break
        else:
            out.append(-1)
    return out


def first_branch(token: TokenRecord, split: str) -> int:
    for f in token.lineage:
        if f[0] == split:
            return f[1]
    return -1


def map_input(state: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    """A child's state: a copy of ``state``, or only the mapped paths (child <- parent)."""
    if not mapping:
        return copy_state(state)
    out: dict[str, Any] = {}
    for child_path, parent_path in mapping.items():
        set_path(out, child_path, copy_state({"v": get_path(state, parent_path)})["v"])
    return out


def map_output(
    child: Mapping[str, Any], mapping: Mapping[str, str], parent: Mapping[str, Any]
) -> dict[str, Any]:
    """Top-level parent keys to set from a child's final state (parent path <- child path)."""
    out: dict[str, Any] = {}
    for parent_path, child_path in mapping.items():
        value = get_path(child, child_path)
        head, _, rest = parent_path.partition(".")
        if rest:
            if head not in out:
                current = parent.get(head)
                out[head] = copy_state(current) if isinstance(current, dict) else {}
            set_path(out[head], rest, value)
        else:
            out[head] = value
    return out
