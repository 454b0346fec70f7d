"""A run's phases through a stand-in for the executor: what a phase's token records and what
error a failed phase gives the run; without an engine."""

from __future__ import annotations

import itertools
from collections.abc import Coroutine
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from flowtide.authoring import node
from flowtide.engine import NodeContext
from flowtide.engine.run.attempts import Attempt, AttemptCall
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.view import RunView
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import CancelScope
from flowtide.model.placements import Phase, PhaseKind
from flowtide.model.settings import NodeSettings
from flowtide.store.base import RunRecord, TokenStatus
from tests.engine.run.stand_in import RecordedSteps

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@node(outputs=["done"], register=False)
async def prepare(ctx: NodeContext) -> str:
    return "done"


class Ex(RecordedSteps):
    """The executor's operations a phase calls; its node's attempt ends as ``outcome`` says."""

    def __init__(self, outcome: Attempt) -> None:
        super().__init__(RunView(RunRecord("r", "f", "1", "running", T0), {"a": 1}), T0)
        self.plan: Any = SimpleNamespace(settings={"pre": NodeSettings()})
        self.code: Any = SimpleNamespace(impls={"pre": prepare})
        self.ids = itertools.count(1)
        self.runner = Runner(outcome)
        self.attempts: Any = self.runner
        self.merger = StateMerger({})
        self.starting: set[str] = set()
        self.token_attempts = TokenAttempts(self)

    def next_visit(self, placement: str) -> int:
        return 1

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        coro.close()  # (the phase's node starts no process here)


class Runner:
    """An attempt runner whose attempt ends as ``outcome`` says; it records each scope."""

    def __init__(self, outcome: Attempt) -> None:
        self.outcome = outcome
        self.scopes: list[CancelScope] = []

    def invoke(self, call: AttemptCall, hooks: Any = None) -> Coroutine[Any, Any, Attempt]:
        self.scopes.append(call.parent)

        async def ran() -> Attempt:
            return self.outcome

        return ran()


PRE = Phase(id="pre", node="prepare", phase=PhaseKind.PRE)


async def test_a_phase_that_succeeds_records_its_token_and_its_state_change() -> None:
    ex = Ex(Attempt("ok", output="done", changes=({"b": 2}, [])))
    assert await Phases(ex).run(PRE) is None
    started, finished = ex.commits
    assert started.tokens[0].placement == "pre"
    assert finished.tokens[0].status is TokenStatus.DONE
    assert finished.state == {"b": 2}
    assert ex.runner.scopes == [ex.root]


async def test_a_failed_pre_phase_gives_the_run_a_pre_phase_error() -> None:
    ex = Ex(Attempt("error", error=ValueError("no")))
    err = await Phases(ex).run(PRE)
    assert err is not None and err.type == "ValueError"
    assert "pre" in err.message and "no" in err.message
    assert ex.commits[-1].tokens[0].status is TokenStatus.FAILED


async def test_a_post_phase_runs_outside_the_run_scope_and_keeps_its_own_error() -> None:
    ex = Ex(Attempt("error", error=ValueError("no")))
    err = await Phases(ex).run(PRE, post=True)
    assert err is not None and err.message == "no"
    assert ex.runner.scopes[0] is not ex.root
