"""Child runs through a stand-in for the executor: how a subflow's token moves by how its
child ended, when a child is not started, a child that waits parked; without an engine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult
from flowtide.engine.run.attempts import Attempt, Running
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.child_runs import ChildRuns, map_input, map_output
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.view import RunView
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import CancelReason, CancelScope
from flowtide.model.placements import AnyPlacement, Subflow
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    RunRecord,
    TokenRecord,
    TokenStatus,
)
from tests.engine.run.stand_in import RecordedSteps

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def result(lifecycle: Lifecycle, state: dict[str, Any] | None = None) -> RunResult:
    return RunResult(
        run_id="r.child",
        lifecycle=lifecycle,
        outcome=lifecycle.value,
        state=state or {},
    )


class Child:
    """A started child run that ends (or waits parked first) when the test says."""

    def __init__(self, run: RunRecord) -> None:
        self.run = run
        self.created = True
        self.end: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        self.settle: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()

    async def ended(self) -> RunResult:
        return await self.end

    async def settled(self) -> RunResult:
        return await self.settle


@dataclass
class Starter:
    """Where children start: records each start, hands out the child to end."""

    child: Child | None = None
    starts: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def start_child(
        self,
        parent: RunRecord,
        flow_id: str,
        state: dict[str, Any],
        scope: CancelScope,
        token: TokenRecord | None,
        item: Any,
        run_id: str,
    ) -> Child:
        self.starts.append((flow_id, run_id, state))
        self.child = Child(RunRecord(run_id, flow_id, "1", "running", T0))
        self.started.set()
        return self.child


class Ex(RecordedSteps):
    """The executor's operations child runs call, recorded."""

    def __init__(self, max_depth: int = 5, state: dict[str, Any] | None = None) -> None:
        super().__init__(RunView(RunRecord("r", "parent", "1", "running", T0), state or {}), T0)
        self.plan: Any = SimpleNamespace(settings={"sub": NodeSettings()})
        self.starter = Starter()
        self.host: Any = self.starter
        self.flow: Any = SimpleNamespace(max_depth=max_depth)
        self.merger = StateMerger({})
        self.steps = StepLock()
        self.starting: set[str] = set()
        self.running: Running = {}
        self.moves: list[str] = []
        self.ends: list[Lifecycle] = []
        self.settler = DrainSeen()
        plan: Any = self.plan  # (arming a subflow's token reads only its settings here)
        self.arming = Arming(self.view, plan, self.clock, self.starting, self.commit)
        self.attempts: Any = None  # (a child run runs no node code of this run)
        self.token_attempts = TokenAttempts(self)
        self.task_steps: Any = AfterAttempts(self.moves)

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        coro.close()  # (a child run's attempt starts no process here)

    async def move(self, m: Move) -> Moved:
        self.moves.append(m.output)
        if m.update is not None:
            m.update()
        return Moved(True)

    def request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None:
        self.ends.append(lifecycle)


class DrainSeen:
    """Settling as child runs see it: told when the run may have drained."""

    def __init__(self) -> None:
        self.drained = asyncio.Event()

    def maybe_drained(self) -> None:
        self.drained.set()


class AfterAttempts:
    """The task steps a child run hands an attempt that did not end well: recorded."""

    def __init__(self, moves: list[str]) -> None:
        self.moves = moves

    async def after_attempt(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
    ) -> TokenRecord | None:
        self.moves.append(f"after {attempt.kind}")
        return None


def token() -> TokenRecord:
    return TokenRecord("r.1", "r", "sub", TokenStatus.READY, visit=1, created_at=T0)


async def subflow(ex: Ex, p: Subflow, end: RunResult, parked: bool = False) -> ChildRuns:
    """``ex``'s child runs, once the subflow ``p``'s token has moved on by how its child
    ended (``end``), having waited parked first if ``parked``."""
    t = token()
    ex.view.tokens[t.id] = t
    children = ChildRuns(ex)
    task = asyncio.ensure_future(children.at_subflow(t, p))
    await ex.starter.started.wait()
    assert ex.starter.child is not None
    if parked:
        waiting = RunResult(
            run_id="r.child",
            lifecycle=Lifecycle.PARKED,
            outcome=None,
            state={},
            parked=(ParkedToken("t", "ask", "k", None),),
        )
        ex.starter.child.settle.set_result(waiting)
        await ex.settler.drained.wait()  # (told once the token counts as parked)
        # (each parked token says the run it is in: the child)
        assert children.waits[t.id].parked[0].run_id == ex.starter.starts[0][1]
        assert children.parked() == [children.waits[t.id].parked[0]]
    ex.starter.child.end.set_result(end)
    await task
    return children


async def test_a_completed_child_moves_the_token_on_success_with_its_mapped_output() -> None:
    ex = Ex(state={"a": 1})
    p = Subflow(id="sub", flow="child", input={"x": "a"}, output={"b": "y"})
    await subflow(ex, p, result(Lifecycle.COMPLETED, {"y": 2}))
    assert ex.starter.starts[0][0] == "child"
    assert ex.starter.starts[0][2] == {"x": 1}
    assert ex.moves == ["success"]
    assert ex.view.state == {"a": 1, "b": 2}
    assert ex.running == {}


async def test_a_failed_child_without_an_error_route_fails_the_run() -> None:
    ex = Ex()
    await subflow(ex, Subflow(id="sub", flow="child"), result(Lifecycle.FAILED))
    assert ex.moves == []
    assert ex.ends == [Lifecycle.FAILED]
    assert "r.1" not in ex.view.tokens


async def test_a_failed_child_with_an_error_route_moves_the_token_on_error() -> None:
    ex = Ex()
    p = Subflow(id="sub", flow="child", routes={"error": "end"})
    await subflow(ex, p, result(Lifecycle.FAILED))
    assert ex.moves == ["error"]
    assert ex.ends == []


async def test_a_child_that_waits_parked_counts_its_token_parked_until_it_ends() -> None:
    ex = Ex()
    p = Subflow(id="sub", flow="child")
    children = await subflow(ex, p, result(Lifecycle.COMPLETED), parked=True)
    assert children.waits == {}
    assert ex.moves == ["success"]


async def test_a_child_too_deep_is_not_started() -> None:
    ex = Ex(max_depth=0)
    attempt, got = await ChildRuns(ex).run_child(
        "sub", "child", {}, NodeSettings(), key="k", child_id="c", item=None, token=None
    )
    assert attempt.kind == "error" and got is None
    assert ex.starter.starts == []


def test_mapped_input_and_output_copy_only_the_mapped_paths() -> None:
    parent = {"a": {"b": [1]}, "c": 3}
    child = map_input(parent, {"x.y": "a.b"})
    assert child == {"x": {"y": [1]}}
    child["x"]["y"].append(2)
    assert parent["a"] == {"b": [1]}  # (a copy)
    assert map_output({"r": 5}, {"a.d": "r"}, parent) == {"a": {"b": [1], "d": 5}}
