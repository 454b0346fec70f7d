"""The driver through a stand-in for the run, without an engine: a token is handed from
placement to placement to the part of each kind (under the step lock unless that placement runs
code), and once its task ends the run is told it may have drained; a token cancelled or a run
ended stops it; what a part raises drops the run's view or fails the run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from flowtide.authoring import FlowBuilder
from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.executor.driver import Driver
from flowtide.engine.run.view import RunEnd
from flowtide.model.placements import AnyPlacement
from flowtide.store.base import StoreConflict, TokenRecord, TokenStatus
from tests.engine.run.stand_in import RecordedRun, ask

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def flow_plan() -> FlowPlan:
    """ask -> nap (a wait) -> end."""
    b = FlowBuilder("urn:test:flow:driver")
    b.task("ask", ask, {"done": "nap"})
    b.wait("nap", "PT5M", then="end")
    b.terminal("end")
    return FlowPlan.build(b.build(), lambda ref: None)


class Placements:
    """The parts a token is handed to at a task, a wait and a terminal: each records where
    the token came, and whether another step could take the step lock meanwhile, and moves
    it on by ``then`` (or raises ``raising`` at ``at``)."""

    def __init__(self, ex: DrivenTokens) -> None:
        self.ex = ex
        self.then = {"ask": "nap", "nap": "end"}
        self.seen: list[tuple[str, bool]] = []
        self.raising: BaseException | None = None
        self.at = ""

    async def _at(self, token: TokenRecord, p: AnyPlacement) -> TokenRecord | None:
        if p.id == self.at and self.raising is not None:
            raise self.raising
        self.seen.append((p.id, await self._lock_free()))
        if p.id not in self.then:
            self.ex.view.tokens.pop(token.id, None)
            return None
        token.placement = self.then[p.id]
        return token

    async def _lock_free(self) -> bool:
        """Whether another task could take the run's step lock now."""
        took = asyncio.Event()

        async def other() -> None:
            async with self.ex.steps.hold():
                took.set()

        task = asyncio.ensure_future(other())
        for _ in range(3):
            await asyncio.sleep(0)
        free = took.is_set()
        if not free:
            task.cancel()
        return free

    at_task = _at
    at_wait = _at
    at_terminal = _at


class DrivenTokens(RecordedRun):
    """A run whose tokens' placements are :class:`Placements`; what the driver tells it
    (drained, a view lost) is recorded."""

    def __init__(self) -> None:
        super().__init__(flow_plan(), {"ask": ask}, T0)
        self.placements = Placements(self)
        self.handed: Any = self.placements
        self.tasks: set[asyncio.Future[Any]] = set()
        self.drained = 0
        self.lost: list[BaseException] = []

    @property
    def settler(self) -> DrivenTokens:
        return self

    def maybe_drained(self) -> None:
        self.drained += 1

    def working(self) -> bool:
        return bool(self.tasks)

    def track(self, task: asyncio.Task[Any]) -> None:
        self.tasks.add(task)

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None:
        self.lost.append(exc)


def driver(ex: DrivenTokens) -> Driver:
    host: Any = ex
    host.task_steps = ex.placements  # (the driver hands tasks, waits and terminals to them)
    return Driver(host)


async def test_a_token_goes_placement_after_placement_under_the_lock_unless_code_runs() -> None:
    ex = DrivenTokens()
    t = ex.token("ask")
    await driver(ex).drive(t)
    # A task runs code: it takes the step lock for its own steps only. A wait and a terminal
    # are each one step, under the lock.
    assert ex.placements.seen == [("ask", True), ("nap", False), ("end", False)]
    assert ex.drained == 1 and ex.ends == [] and ex.lost == []


async def test_a_cancelled_token_or_an_ended_run_is_not_driven() -> None:
    ex = DrivenTokens()
    t = ex.token("ask")
    t.status = S.CANCELLED
    await driver(ex).drive(t)
    ended = DrivenTokens()
    ended.view.end = RunEnd(Lifecycle.CANCELLED, [], None)
    await driver(ended).drive(ended.token("ask"))
    assert ex.placements.seen == [] and ended.placements.seen == []
    assert ex.drained == 1 and ended.drained == 1


async def test_a_store_conflict_drops_the_view_and_an_error_fails_the_run() -> None:
    lost = DrivenTokens()
    lost.placements.at, lost.placements.raising = "nap", StoreConflict("moved by another")
    await driver(lost).drive(lost.token("ask"))
    assert [type(e) for e in lost.lost] == [StoreConflict] and lost.ends == []
    failed = DrivenTokens()
    failed.placements.at, failed.placements.raising = "nap", ValueError("bad")
    await driver(failed).drive(failed.token("ask"))
    ((lifecycle, errors),) = failed.ends
    assert lifecycle is Lifecycle.FAILED and errors[0].placement == "nap"
    assert failed.lost == [] and failed.drained == 1
