"""What the composed parts of the executor call back on it, as stand-ins for the parts' own
tests: every part's step (``StepPort``: events made on a virtual clock, commits recorded, not
sent), the rest of a run that the router, the task steps, signals and due firings need
(:class:`RecordedRun`), and what its start, settling and end need besides
(:class:`DrivenRun`)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.clock import VirtualClock
from flowtide.engine.context import NodeContext
from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import ErrorData, EventPayload, error_data
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult
from flowtide.engine.run.attempts import NO_HOOKS, Attempt, AttemptCall, Running, StartHooks
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.child_runs import ChildWait
from flowtide.engine.run.executor.closing import RunClosing, StateUpdate
from flowtide.engine.run.executor.ending import RunEnding
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.executor.launching import RunStart
from flowtide.engine.run.executor.router import Router
from flowtide.engine.run.executor.settling import Settling
from flowtide.engine.run.executor.signals import Signals
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.view import RunEnd, RunView
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import Cancellation, CancelReason, CancelScope
from flowtide.model.placements import Terminal
from flowtide.store.base import (
    Commit,
    EventRecord,
    Lease,
    ParkStatus,
    RunRecord,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)


class RecordedSteps:
    """The run's view, a virtual clock at ``now``, a root scope, and the commits asked for."""

    def __init__(self, view: RunView, now: datetime) -> None:
        self.view = view
        self.clock = VirtualClock(now)
        self.root = CancelScope(None)
        self.commits: list[Commit] = []
        self.last: list[bool] = []
        """Whether each commit was the last step of its task (``commit``'s ``last``)."""

    def event(
        self,
        token: TokenRecord | None,
        payload: EventPayload,
        *,
        placement: str | None = None,
        attempt: int | None = None,
    ) -> EventRecord:
        return event_record(payload, self.view.run.id, self.clock.now(), placement=placement)

    def error_info(self, exc: BaseException, placement: str | None = None) -> ErrorInfo:
        return ErrorInfo.of(exc, placement)

    def error_data(self, exc: BaseException) -> ErrorData:
        return error_data(exc, None)

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        last: bool = False,
    ) -> bool:
        self.commits.append(c)
        self.last.append(last)
        return True


class StandInRunner:
    """An attempt runner whose every attempt ends as ``outcome`` says (no thread, no process);
    it records the calls it was asked to run."""

    def __init__(self, outcome: Attempt | None = None) -> None:
        self.outcome = outcome
        self.calls: list[AttemptCall] = []

    def needs_thread(self, impl: NodeImplementation) -> bool:
        return False

    def take_thread_now(self, key: str, impl: NodeImplementation) -> bool:
        return True

    async def wait_for_thread(self, key: str, parent: CancelScope) -> Cancellation | None:
        return None

    def drop_thread(self, key: str) -> None:
        pass

    async def invoke(self, call: AttemptCall, hooks: StartHooks = NO_HOOKS) -> Attempt:
        assert self.outcome is not None, "no attempt expected"
        self.calls.append(call)
        return self.outcome


class RecordedRun(RecordedSteps):
    """The executor's operations the router and the task steps call back besides a step, for
    ``plan`` and its node code ``impls``: node attempts end as ``runner`` says; moves, spawned
    tokens, closed parks, the run's end and the sweeper's wake-ups are recorded. ``refusing``:
    every commit is skipped (as when the run ended first). Its own ``move`` is recorded, not
    made; the parts under test get a real router and join groups on it."""

    def __init__(
        self,
        plan: FlowPlan,
        impls: Mapping[str, NodeImplementation],
        now: datetime,
        runner: StandInRunner | None = None,
    ) -> None:
        super().__init__(RunView(RunRecord("r", plan.flow.id, "1", "running", now), {}), now)
        self.plan = plan
        self.code: Any = SimpleNamespace(impls=impls)
        self.woken: list[datetime] = []
        self.host: Any = SimpleNamespace(random=random.Random(7), wake_sweeper=self.woken.append)
        self.steps = StepLock()
        self.starting: set[str] = set()
        self.prestarted: set[str] = set()
        self.running: Running = {}
        self.merger = StateMerger({})
        self.runner = runner or StandInRunner()
        self.attempts: Any = self.runner
        self.arming = Arming(self.view, plan, self.clock, self.starting, self.commit)
        self.token_attempts = TokenAttempts(self)
        self.router = Router(self, self)
        self.joins = Joins(self, self.router)
        self.ids = itertools.count(1)
        self.moves: list[Move] = []
        self.spawned: list[str] = []
        self.closed_parks: list[tuple[str, ParkStatus]] = []
        self.ends: list[tuple[Lifecycle, list[ErrorInfo]]] = []
        self.refusing = False
        self.committer = Committer(self.host)
        self.cancels: list[str] = []
        self.closed = False
        self.task_steps = TaskSteps(self)
        self.signals = Signals(self)

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        last: bool = False,
    ) -> bool:
        if self.refusing:
            return False
        if update is not None:
            c.state, c.state_deleted = update()
        return await super().commit(c, last=last)

    async def move(self, m: Move) -> Moved:
        self.moves.append(m)
        if m.update is not None:
            m.update()
        return Moved(True)

    def token(self, placement: str, status: TokenStatus = TokenStatus.READY) -> TokenRecord:
        """A live token of the run at ``placement``."""
        t = self.new_token(placement, ())
        t.status = status
        return t

    def new_token(self, placement: str, lineage: tuple[tuple[str, int, int], ...]) -> TokenRecord:
        t = TokenRecord(
            f"r.{next(self.ids)}",
            "r",
            placement,
            TokenStatus.READY,
            visit=self.next_visit(placement),
            lineage=lineage,
            created_at=self.clock.now(),
        )
        self.view.tokens[t.id] = t
        return t

    def next_visit(self, placement: str) -> int:
        self.view.visits[placement] = self.view.visits.get(placement, 0) + 1
        return self.view.visits[placement]

    def split_tokens(
        self, token: TokenRecord, targets: Sequence[str], split: str
    ) -> list[TokenRecord]:
        n = len(targets)
        return [token, *(self.new_token(t, ((split, i, n),)) for i, t in enumerate(targets))]

    def spawn(self, token: TokenRecord) -> None:
        self.spawned.append(token.id)

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        coro.close()  # (no node starts a process here)

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None:
        if self.view.parks.pop(token.id, None) is not None:
            self.closed_parks.append((token.id, status))

    def request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None:
        self.ends.append((lifecycle, list(errors)))

    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: StateUpdate | None,
    ) -> RunClosing | None:
        return None  # (the run's end is the driver's: never folded into a step here)

    def ended_by_step(self, closing: RunClosing) -> None:
        raise AssertionError("no run's end is folded into a step here")

    def fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None:
        token.status = TokenStatus.FAILED
        self.view.tokens.pop(token.id, None)
        self.request_end(Lifecycle.FAILED, [self.error_info(exc, token.placement)], interrupted)


class RecordingHost:
    """The engine as a run's start, settling and end see it: what they tell it is recorded."""

    def __init__(self) -> None:
        self.random = random.Random(7)
        self.woken: list[datetime] = []
        self.told: list[tuple[str, object]] = []
        self.cancelled_children: list[str] = []

    def wake_sweeper(self, at: datetime) -> None:
        self.woken.append(at)

    def let_go(self, executor: object) -> None:
        self.told.append(("let_go", executor))

    def discard(self, executor: object) -> None:
        self.told.append(("discard", executor))

    def forget(self, executor: object) -> None:
        self.told.append(("forget", executor))

    def settled(self, result: RunResult) -> None:
        self.told.append(("settled", result))

    def ended(self, result: RunResult) -> None:
        self.told.append(("ended", result))

    async def cancel_children(self, run_ids: Sequence[str], reason: str) -> None:
        self.cancelled_children.extend(run_ids)

    def said(self) -> list[str]:
        return [what for what, _ in self.told]


class NoChildWaits:
    """No subflow token of the run waits for a child that waits parked."""

    def __init__(self) -> None:
        self.waits: dict[str, ChildWait] = {}

    def parked(self) -> list[ParkedToken]:
        return []


class DrivenRun(RecordedRun):
    """A :class:`RecordedRun` with what a run's start, settling and end need besides: its tasks,
    child waits, lease, timers and flags, a :class:`RecordingHost`, and the parts themselves
    (:attr:`settler`, :attr:`ending`, :attr:`run_start`); tokens it is asked to drive are
    recorded, not driven."""

    def __init__(
        self, plan: FlowPlan, impls: Mapping[str, NodeImplementation], now: datetime
    ) -> None:
        super().__init__(plan, impls, now)
        self.recording = RecordingHost()
        self.host = self.recording
        self.flow = plan.flow
        self.tasks: set[asyncio.Future[Any]] = set()
        self.children = NoChildWaits()
        self.released = False
        self.lease: Lease | None = None
        self.taking: Lease | None = None
        self.deadline_timer: Any = None
        self.started = True
        self.handed_off = False
        self.driven: list[str] = []
        self.closes = 0
        self.lost: list[BaseException] = []
        self.phases: Any = None  # (no phase here)
        self.settler = Settling(self)
        self.ending = RunEnding(self)
        self.run_start = RunStart(self)

    def working(self, besides: asyncio.Future[Any] | None = None) -> bool:
        return any(t is not besides for t in self.tasks)

    def close(self, notify: bool = True) -> None:
        self.closed = True
        self.closes += 1

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None:
        self.lost.append(exc)

    @property
    def driver(self) -> DrivenRun:
        """Its own driver: what it is asked to drive is recorded (:meth:`drive`)."""
        return self

    async def drive(self, token: TokenRecord | None) -> None:
        if token is not None:
            self.driven.append(token.id)

    def request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None:
        super().request_end(lifecycle, errors, interrupted, cancel_reason=cancel_reason)
        if self.view.end is None:
            self.view.end = RunEnd(lifecycle, list(errors), interrupted)


@node(outputs=["done"], register=False)
def ask(ctx: NodeContext) -> str:
    return "done"


def one_task_run(flow_id: str, now: datetime) -> DrivenRun:
    """A driven run of a flow with one task, ``ask`` (its node returns ``done``), and its
    terminal, ``end``."""
    b = FlowBuilder(flow_id)
    b.task("ask", ask, {"done": "end"})
    b.terminal("end")
    return DrivenRun(FlowPlan.build(b.build(), lambda ref: None), {"ask": ask}, now)
