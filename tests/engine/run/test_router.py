"""The executor's router through a stand-in for the run, without an engine: a move commits the
token at its target with its next attempt started, a split spawns its other branches, a move to
a terminal ends the token in the same commit, an output that routes nowhere fails the run, a
refused commit leaves the run as it was, a branch's move to its join records its arrival in the
same commit, and a branch that leaves a join's reach makes the join due (the router says so; it
fires no join itself)."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.event_types import NodeFinished
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.executor.router import Router
from flowtide.engine.run.move import NOT_MOVED, Move, MoveEvent
from flowtide.store.base import TokenRecord, TokenStatus
from tests.engine.run.stand_in import RecordedRun

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@node(outputs=["next", "go", "fin"], register=False)
def first(ctx: NodeContext) -> str:
    return "next"


@node(outputs=["done", "skip"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def flow_plan() -> FlowPlan:
    """first -next-> second; first -go-> a, b, c -done-> j (-skip-> end); first -fin-> end."""
    b = FlowBuilder("urn:test:flow:router")
    b.task("first", first, {"next": "second", "go": ["a", "b", "c"], "fin": "end"})
    b.task("second", step, {"done": "end", "skip": "end"})
    for name in "abc":
        b.task(name, step, {"done": "j", "skip": "end"})
    b.join("j", "all", {"success": "end", "error": "end"})
    b.terminal("end", "shipped")
    return FlowPlan.build(b.build(), lambda ref: None)


def run() -> RecordedRun:
    impls = {"first": first, "second": step, "a": step, "b": step, "c": step}
    return RecordedRun(flow_plan(), impls, T0)


def finished(output: str) -> MoveEvent:
    return lambda to: NodeFinished(output=output, to=to)


async def test_a_move_commits_the_token_at_its_target_with_its_next_attempt_started() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    moved = await Router(ex, ex).move(
        Move(t, ex.plan.placements["first"], "next", finished("next"))
    )
    assert moved.committed and moved.next is t and not moved.joins_due
    assert (t.placement, t.status, t.visit) == ("second", S.RUNNING, 1)
    assert ex.prestarted == {t.id}  # (its task goes on with the attempt the move started)
    (c,) = ex.commits
    assert c.tokens == [t]
    assert [e.kind for e in c.events] == ["node_finished", "node_started"]
    assert c.events[0].data["to"] == ["second"]


async def test_a_split_goes_on_with_its_first_branch_and_spawns_the_others() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    moved = await Router(ex, ex).move(Move(t, ex.plan.placements["first"], "go", finished("go")))
    assert t.status is S.DONE and t.id not in ex.view.tokens
    branches = list(ex.view.tokens.values())
    assert [b.placement for b in branches] == ["a", "b", "c"]
    assert moved.next is branches[0]
    assert ex.spawned == [b.id for b in branches[1:]]
    assert len(ex.view.joins) == 1  # (the join its branches reach expects them)
    (c,) = ex.commits
    assert c.tokens == [t, *branches]


async def test_a_move_to_a_terminal_ends_the_token_in_the_same_commit() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    moved = await Router(ex, ex).move(Move(t, ex.plan.placements["first"], "fin", finished("fin")))
    assert moved == type(moved)(True, None)
    assert t.status is S.DONE and t.id not in ex.view.tokens
    assert (ex.view.terminals, ex.view.outcome) == (["end"], "shipped")
    (c,) = ex.commits
    assert [e.kind for e in c.events] == ["node_finished", "terminal_reached"]


async def test_an_output_that_routes_nowhere_records_its_event_and_fails_the_run() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    moved = await Router(ex, ex).move(
        Move(t, ex.plan.placements["first"], "lost", finished("lost"))
    )
    assert moved is NOT_MOVED
    (c,) = ex.commits
    assert [e.kind for e in c.events] == ["node_finished"] and "to" not in c.events[0].data
    ((lifecycle, errors),) = ex.ends
    assert lifecycle is Lifecycle.FAILED and errors[0].type == "UnroutedOutputError"
    assert t.status is S.FAILED


async def test_a_move_the_run_refuses_leaves_no_attempt_started_and_no_terminal() -> None:
    ex = run()
    ex.refusing = True  # (the run ended before the move could commit)
    t = ex.token("first", S.RUNNING)
    moved = await Router(ex, ex).move(
        Move(t, ex.plan.placements["first"], "next", finished("next"))
    )
    assert moved is NOT_MOVED
    assert ex.prestarted == set() and ex.starting == set()
    t2 = ex.token("first", S.RUNNING)
    p = ex.plan.placements["first"]
    assert not (await Router(ex, ex).move(Move(t2, p, "fin", finished("fin")))).committed
    assert t2.status is S.READY and ex.view.terminals == []


async def test_a_refused_move_to_a_join_leaves_the_branch_not_arrived() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    router = Router(ex, ex)
    await router.move(Move(t, ex.plan.placements["first"], "go", finished("go")))
    a, b, _ = ex.view.tokens.values()
    await router.move(Move(a, ex.plan.placements["a"], "done", finished("done")))
    ex.refusing = True  # (the run ended before the move could commit)
    assert (
        await router.move(Move(b, ex.plan.placements["b"], "done", finished("done"))) is NOT_MOVED
    )
    assert b.status is S.READY
    (group,) = ex.view.joins.values()
    assert group.arrived == [a] and group.branches == {0}


async def test_a_branch_that_leaves_a_joins_reach_makes_the_join_due_without_firing_it() -> None:
    ex = run()
    t = ex.token("first", S.RUNNING)
    router = Router(ex, ex)
    await router.move(Move(t, ex.plan.placements["first"], "go", finished("go")))
    branch: TokenRecord = next(iter(ex.view.tokens.values()))
    at = ex.plan.placements[branch.placement]
    moved = await router.move(Move(branch, at, "done", finished("done")))
    # It arrives at the join in the move's own commit; the join is judged once that is stored.
    assert moved.joins_due and moved.next is None and branch.status is S.ARRIVED
    assert [e.kind for e in ex.commits[-1].events] == ["node_finished", "join_arrived"]
    other = list(ex.view.tokens.values())[1]
    moved = await router.move(Move(other, ex.plan.placements["b"], "skip", finished("skip")))
    assert moved.joins_due
    assert len(ex.commits) == 3  # (the router fired nothing: its caller evaluates the joins)
