"""The executor's task steps through a stand-in for the run, without an engine: an attempt's
start and what follows it (a move with what the node changed, a retry's backoff, a failure, a
window's end on the ``timeout`` route, a park), attempts queued to start started by one step, a
wait's due instant, and terminals."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.output import Park
from flowtide.engine.run.attempts import Attempt
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.marks import mark_due
from flowtide.model.placements import Task, Terminal, Wait
from flowtide.store.base import TokenStatus
from tests.engine.run.stand_in import RecordedRun, StandInRunner

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
UNCHANGED: tuple[dict[str, object], list[str]] = ({}, [])


@node(outputs=["done"], register=False)
def work(ctx: NodeContext) -> str:
    return "done"


def flow_plan() -> FlowPlan:
    """plain -> flaky (retried) -> timed (a window of 10 s: ``timeout`` -> bad) -> nap -> end."""
    b = FlowBuilder("urn:test:flow:task-steps")
    b.task("plain", work, {"done": "flaky"})
    b.task("flaky", work, {"done": "timed"}, retry={"backoff": "fixed", "initial": "PT4S"})
    b.task("timed", work, {"done": "nap", "timeout": "bad"}, timeout="PT10S")
    b.wait("nap", "PT5M", then="end")
    b.terminal("end", "shipped")
    b.terminal("bad", "failed")
    return FlowPlan.build(b.build(), lambda ref: None)


def run(outcome: Attempt | None = None) -> tuple[RecordedRun, TaskSteps]:
    impls = {"plain": work, "flaky": work, "timed": work}
    ex = RecordedRun(flow_plan(), impls, T0, StandInRunner(outcome))
    return ex, TaskSteps(ex)


def task(ex: RecordedRun, placement: str) -> Task:
    p = ex.plan.placements[placement]
    assert isinstance(p, Task)
    return p


async def test_an_attempt_that_returns_moves_the_token_on_with_what_it_changed() -> None:
    ex, steps = run(Attempt("ok", output="done", update={"n": 1}, changes=UNCHANGED))
    t = ex.token("plain")
    assert await steps.at_task(t, task(ex, "plain")) is None  # (the stand-in's move: no next)
    start, *_ = ex.commits
    assert [e.kind for e in start.events] == ["node_started"] and t.status is S.RUNNING
    assert [c.placement for c in ex.runner.calls] == ["plain"]
    (m,) = ex.moves
    assert (m.token, m.output, ex.view.state) == (t, "done", {"n": 1})
    assert ex.view.last_placements == ["plain"]


async def test_a_failed_attempt_with_retries_left_waits_out_its_backoff() -> None:
    ex, steps = run(Attempt("error", error=RuntimeError("boom")))
    t = ex.token("flaky")
    await steps.at_task(t, task(ex, "flaky"))
    assert (t.status, t.attempt, t.due) == (S.WAITING, 2, T0 + timedelta(seconds=4))
    retried = ex.commits[-1]
    assert [e.kind for e in retried.events] == ["node_failed", "node_retried"]
    assert [d.when for d in retried.due] == [T0 + timedelta(seconds=4)]
    assert ex.woken == [T0 + timedelta(seconds=4)] and ex.moves == [] and ex.ends == []


async def test_a_failed_attempt_without_retries_fails_the_token_and_the_run() -> None:
    ex, steps = run(Attempt("error", error=RuntimeError("boom")))
    t = ex.token("plain")
    await steps.at_task(t, task(ex, "plain"))
    assert t.status is S.FAILED and t.id not in ex.view.tokens
    assert list(ex.commits[-1].due_cleared) == [t.id]
    ((lifecycle, errors),) = ex.ends
    assert (lifecycle, errors[0].type) == (Lifecycle.FAILED, "RuntimeError")


async def test_an_attempt_whose_window_ended_takes_the_timeout_route() -> None:
    ex, steps = run(Attempt("timeout", deadline=T0 + timedelta(seconds=10)))
    t = ex.token("timed")
    await steps.at_task(t, task(ex, "timed"))
    (m,) = ex.moves
    assert m.output == "timeout" and ex.ends == []
    assert m.event(["bad"]).to == ["bad"]


async def test_a_parked_attempt_opens_a_park_with_what_the_node_changed() -> None:
    park = Park(key="order-7", payload={"ask": "approve"})
    ex, steps = run(Attempt("park", park=park, update={"asked": True}, changes=UNCHANGED))
    t = ex.token("plain")
    await steps.at_task(t, task(ex, "plain"))
    assert t.status is S.PARKED and ex.view.parks[t.id].key == "order-7"
    parked = ex.commits[-1]
    assert [p.token_id for p in parked.parks] == [t.id]
    assert [e.kind for e in parked.events] == ["parked"]
    assert ex.view.state == {"asked": True} and ex.moves == []


async def test_a_wait_arms_its_due_instant_then_moves_on_elapsed() -> None:
    ex, steps = run()
    t = ex.token("nap")
    p = ex.plan.placements["nap"]
    assert isinstance(p, Wait)
    await steps.at_wait(t, p)
    assert (t.status, t.due) == (S.WAITING, T0 + timedelta(minutes=5))
    assert ex.woken == [T0 + timedelta(minutes=5)] and ex.moves == []
    mark_due(t)  # (what firing its due entry does)
    await steps.at_wait(t, p)
    assert [m.output for m in ex.moves] == ["elapsed"]


async def test_a_terminal_sets_the_outcome_and_a_failed_one_ends_the_run() -> None:
    ex, steps = run()
    for at in ("end", "bad"):
        p = ex.plan.placements[at]
        assert isinstance(p, Terminal)
        t = ex.token(at)
        await steps.at_terminal(t, p)
        assert t.status is S.DONE and t.id not in ex.view.tokens
    assert (ex.view.terminals, ex.view.outcome) == (["end", "bad"], "shipped")
    ((lifecycle, errors),) = ex.ends
    assert (lifecycle, errors[0].type) == (Lifecycle.FAILED, "FailedTerminalError")


async def test_attempts_queued_to_start_are_started_by_one_step() -> None:
    ex, steps = run(Attempt("ok", output="done", update={}, changes=UNCHANGED))
    tokens = [ex.token("plain") for _ in range(4)]
    async with ex.steps.hold():  # (another step holds the lock: the starts queue behind it)
        tasks = [asyncio.create_task(steps.at_task(t, task(ex, "plain"))) for t in tokens]
        for _ in range(3):
            await asyncio.sleep(0)
        tokens[2].status = S.CANCELLED  # (cancelled while its start waited: it never starts)
    await asyncio.gather(*tasks)
    starts = [c for c in ex.commits if any(e.kind == "node_started" for e in c.events)]
    started = [t for t in tokens if t is not tokens[2]]
    assert len(starts) == 1, starts
    assert [e.token_id for e in starts[0].events] == [t.id for t in started]
    assert starts[0].tokens == started
    assert [c.key for c in ex.runner.calls] == [t.id for t in started]
    assert len(ex.moves) == 3 and ex.prestarted == set()
