"""A split's branches start eagerly in the splitting task; a task only for those that suspend.

A branch whose node completes without suspending runs to its end (its join, a terminal) before
the next branch starts; one whose node suspends is handed to a task of its own, and its node's
cancel scope goes with it: a run cancel, a run deadline and a ``first`` join's loser
cancellation reach it, and the node observes ``CancelledError``. Both paths (with a hook: the
general path; without: the fast path) start branches so, and give the same history. A branch
whose node runs in a worker thread always suspends: it gets a carrier where it got a task, and
the history is the same with a task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine import Lifecycle, NodeContext, Output
from flowtide.engine import eager as eager_module
from flowtide.model import Flow
from tests.engine.conftest import BranchTasks
from tests.engine.engine_helpers import at, no_op_hooks, run_comparable, running

OBSERVED: list[str] = []


@node(outputs=["done"])
async def instant(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"], execution="inline")
def inline(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
async def sleeps(ctx: NodeContext) -> Output:
    """Suspends in the middle (on the virtual clock): 1 s, or the branch's index in seconds."""
    ctx.state.setdefault("before", [])
    try:
        await ctx.clock.sleep(timedelta(seconds=int(ctx.placement[1:]) or 1))
    except asyncio.CancelledError:
        OBSERVED.append(f"{ctx.placement}: {ctx.cancel_reason}")
        raise
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
async def fails_at_once(ctx: NodeContext) -> str:
    raise ValueError(f"{ctx.placement} failed in its first step")


@node(outputs=["done"], execution="inline")
def mark(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


def split_of(kinds: list[NodeImplementation], mode: str = "all", quorum: int | None = None) -> Flow:
    """A split into one branch per node of ``kinds`` (placements ``b0``, ``b1``, ...), joined by
    ``mode``, then a task and a terminal."""
    names = [f"b{i}" for i in range(len(kinds))]
    shape = "-".join(k.id.rsplit(":", 1)[-1] for k in kinds)
    b = FlowBuilder(f"urn:test:flow:eager-{mode}-{shape}")
    b.task("fork", mark, {"done": names})
    for name, impl in zip(names, kinds, strict=True):
        b.task(name, impl, {"done": "j"})
    b.join("j", mode, {"success": "after"}, quorum=quorum)
    b.task("after", mark, {"done": "end"})
    return b.terminal("end").reducer("visited", "extend").build()


MIXED: list[NodeImplementation] = [
    instant,
    sleeps,
    inline,
    instant,
    sleeps,
    inline,
    sleeps,
    instant,
]


@pytest.mark.parametrize(
    ("mode", "quorum"), [("all", None), ("first", None), ("quorum", 4)], ids=["all", "first", "q4"]
)
async def test_mixed_branches_give_the_same_history_with_and_without_a_hook(
    mode: str, quorum: int | None
) -> None:
    flow = split_of(MIXED, mode, quorum)
    OBSERVED.clear()
    handoffs = eager_module.handoffs
    fast, _ = await run_comparable(flow, hooked=False)
    fast_handoffs = eager_module.handoffs - handoffs
    fast_observed = list(OBSERVED)
    OBSERVED.clear()
    handoffs = eager_module.handoffs
    slow, _ = await run_comparable(flow, hooked=True)
    assert eager_module.handoffs - handoffs == fast_handoffs
    assert fast_observed == OBSERVED
    assert fast == slow
    # Only the branches that suspended got a task (the fork and the rest ran in the run's
    # task); a branch cancelled as a loser before its turn never ran.
    assert fast_handoffs == {"all": 3, "first": 0, "quorum": 2}[mode]
    lifecycle, _outcome, state, *_rest, events = fast
    assert lifecycle is Lifecycle.COMPLETED
    arrived = [e[2] for e in events if e[0] == "node_finished" and e[2].startswith("b")]
    if mode == "all":
        # The branches that do not suspend finish in order, before any sleeper wakes up.
        assert arrived == ["b0", "b2", "b3", "b5", "b7", "b1", "b4", "b6"]
        assert fast_observed == []
    elif mode == "first":
        assert arrived == ["b0"]  # it won before the others started: they never ran
        assert fast_observed == []
        assert state["visited"] == ["fork", "b0", "after"]
    else:
        assert arrived == ["b0", "b2", "b3", "b5"]
        # The sleepers that had suspended (handed to their tasks) observe the cancel; b6 and b7
        # had not started when b5 made the quorum.
        assert sorted(fast_observed) == ["b1: join_loser", "b4: join_loser"]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_first_join_loser_that_suspended_observes_its_cancellation(hooked: bool) -> None:
    # b0 starts first and suspends (its task has not run yet when b1 wins the join).
    OBSERVED.clear()
    flow = split_of([sleeps, instant], "first")
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert OBSERVED == ["b0: join_loser"]
    assert result.state["visited"] == ["fork", "b1", "after"]
    assert "before" not in result.state
    cancelled = [(e.placement, e.data["reason"]) for e in history if e.kind == "token_cancelled"]
    assert cancelled == [("b0", "join_loser")]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_run_cancel_reaches_the_suspended_branches_not_the_finished_ones(
    hooked: bool,
) -> None:
    OBSERVED.clear()
    flow = split_of(MIXED)
    async with running(autojump=False, hooks=no_op_hooks(hooked)) as (engine, clock):
        handle = await engine.start(flow)
        await clock.advance(timedelta(milliseconds=500))
        assert handle.cancel(reason="stop")
        await clock.advance(timedelta(seconds=1))
        result = await handle.result()
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.CANCELLED
    assert sorted(OBSERVED) == ["b1: abort", "b4: abort", "b6: abort"]
    assert result.interrupted_at is not None
    assert result.interrupted_at.at == at(0.5)
    assert sorted(result.interrupted_at.nodes) == ["b1", "b4", "b6"]
    assert result.state["visited"] == ["fork", "b0", "b2", "b3", "b5", "b7"]
    cancelled = sorted(e.placement or "" for e in history if e.kind == "token_cancelled")
    assert cancelled == ["b1", "b4", "b6", "j", "j", "j", "j", "j"]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_run_deadline_reaches_the_suspended_branches(hooked: bool) -> None:
    # b1 sleeps 1 s and arrives; b4 and b6 sleep 4 s and 6 s: the deadline at 3 s cancels them.
    OBSERVED.clear()
    flow = split_of(MIXED)
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(flow, deadline=timedelta(seconds=3))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert sorted(OBSERVED) == ["b4: run_deadline", "b6: run_deadline"]
    assert result.interrupted_at is not None
    assert result.interrupted_at.at == at(3)
    assert result.state["visited"] == ["fork", "b0", "b2", "b3", "b5", "b7", "b1"]
    assert history[-1].kind == "run_finished" and history[-1].at == at(3)


async def test_a_run_deadline_and_a_cancel_give_the_same_history_on_both_paths() -> None:
    flow = split_of(MIXED)
    outcomes = []
    for hooked in (False, True):
        OBSERVED.clear()
        async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
            result = await engine.run(flow, deadline=timedelta(seconds=3))
            history = await engine.history(result.run_id)
        outcomes.append(
            (
                result.lifecycle,
                result.state,
                [(e.kind, e.at, e.placement, e.data.get("reason")) for e in history],
                sorted(OBSERVED),
            )
        )
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_branch_failing_in_its_first_step_fails_the_run(hooked: bool) -> None:
    # b0 and b1 suspend first; b2 fails at once: the run fails, the sleepers observe it, b3
    # (after the failure) never runs its code.
    OBSERVED.clear()
    flow = split_of([sleeps, sleeps, fails_at_once, instant])
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.placement) for e in result.errors] == [("ValueError", "b2")]
    assert sorted(OBSERVED) == ["b0: run_ended", "b1: run_ended"]
    assert "visited" not in result.state or "b3" not in result.state["visited"]
    assert [e.placement for e in history if e.kind == "node_failed"] == ["b2"]
    assert not [e for e in history if e.kind == "node_finished" and e.placement == "b3"]


async def test_a_branch_failing_in_its_first_step_gives_the_same_history_on_both_paths() -> None:
    flow = split_of([sleeps, inline, fails_at_once, instant, sleeps])
    OBSERVED.clear()
    fast, _ = await run_comparable(flow, hooked=False)
    fast_observed = sorted(OBSERVED)
    OBSERVED.clear()
    slow, _ = await run_comparable(flow, hooked=True)
    assert fast == slow
    assert sorted(OBSERVED) == fast_observed == ["b0: run_ended"]  # b3 and b4 never ran


async def test_a_wide_split_of_plain_branches_needs_no_task_per_branch() -> None:
    flow = split_of([instant, inline] * 25)
    created: list[object] = []
    loop = asyncio.get_running_loop()
    original = loop.create_task

    def counting(coro: object, **kw: object) -> object:
        created.append(coro)
        return original(coro, **kw)  # type: ignore[arg-type]

    async with running() as (engine, _clock):
        await engine.run(flow)  # warm up (the engine's own tasks)
        handoffs = eager_module.handoffs
        loop.create_task = counting  # type: ignore[method-assign,assignment]
        try:
            result = await engine.run(flow)
        finally:
            del loop.create_task
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert eager_module.handoffs == handoffs
    assert len(created) < 10  # the run's own tasks, none per branch
    arrivals = [e.placement for e in history if e.kind == "node_finished"]
    assert arrivals == ["fork", *[f"b{i}" for i in range(50)], "after"]


CANCEL: list[Callable[[], object]] = []


@node(outputs=["done"], execution="inline")
def cancels_the_run(ctx: NodeContext) -> Output:
    CANCEL[0]()
    return Output("done", update={"visited": [ctx.placement]})


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_run_cancel_from_a_branch_running_eagerly(hooked: bool) -> None:
    # b0 and b1 suspended (their tasks); b2 cancels the run while it runs in the splitting
    # task: the suspended ones observe it, b2's own step commits nothing, b3 never runs.
    OBSERVED.clear()
    flow = split_of([sleeps, sleeps, cancels_the_run, instant])
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        handle = await engine.start(flow)
        CANCEL[:] = [lambda: handle.cancel(reason="from a branch")]
        result = await handle.result()
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.CANCELLED
    assert sorted(OBSERVED) == ["b0: abort", "b1: abort"]
    assert result.state["visited"] == ["fork"]
    assert [(e.type, e.message) for e in result.errors] == [("RunCancelled", "from a branch")]
    finished = [e.placement for e in history if e.kind == "node_finished"]
    assert finished == ["fork"]


@pytest.mark.parametrize("kind", [instant, inline], ids=["async", "inline"])
@pytest.mark.parametrize("width", [2, 30])
async def test_the_benchmark_split_shape_gives_the_same_history_on_both_paths(
    kind: NodeImplementation, width: int
) -> None:
    flow = split_of([kind] * width)
    fast, _ = await run_comparable(flow, hooked=False)
    slow, _ = await run_comparable(flow, hooked=True)
    assert fast == slow
    kinds_at = [(e[0], e[2]) for e in fast[-1]]
    branches = [f"b{i}" for i in range(width)]
    assert kinds_at == [
        ("run_started", None),
        ("node_started", "fork"),
        ("node_finished", "fork"),
        *[("node_started", b) for b in branches],
        # Each branch, in order: its move and its arrival (one commit); then the join fires.
        *[pair for b in branches for pair in (("node_finished", b), ("join_arrived", "j"))],
        ("join_fired", "j"),
        ("node_started", "after"),
        ("node_finished", "after"),
        ("terminal_reached", "end"),
        ("run_finished", None),
    ]


@node(outputs=["done"])
def threaded(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


async def test_a_branch_whose_node_runs_in_a_thread_is_carried_at_once() -> None:
    # Its node always suspends (a worker thread): it is not started eagerly but given a carrier
    # (no hand-over); the history is the same on both paths, and the branches on the loop
    # finish first, in order.
    flow = split_of([instant, threaded, sleeps, inline, threaded])
    handoffs = eager_module.handoffs
    fast, _ = await run_comparable(flow, hooked=False)
    assert eager_module.handoffs - handoffs == 1  # only the sleeper
    slow, _ = await run_comparable(flow, hooked=True)
    assert fast == slow
    finished = [e[2] for e in fast[-1] if e[0] == "node_finished" and e[2].startswith("b")]
    assert finished[:2] == ["b0", "b3"]
    assert sorted(finished[2:4]) == ["b1", "b4"] and finished[4] == "b2"


async def test_a_branch_that_splits_again_queues_its_branches_behind_the_others() -> None:
    # x splits into x1 and x2 while y (of the outer split) waits for its start: x1 goes on at
    # once, x2 comes after y, as their tasks ran before branches were started eagerly; the
    # inner join's token then arrives at the outer join.
    flow = (
        FlowBuilder("urn:test:flow:eager-nested")
        .task("fork", mark, {"done": ["x", "y"]})
        .task("x", mark, {"done": ["x1", "x2"]})
        .task("x1", instant, {"done": "j2"})
        .task("x2", inline, {"done": "j2"})
        .join("j2", "all", {"success": "j"})
        .task("y", instant, {"done": "j"})
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .reducer("visited", "extend")
        .build()
    )
    fast, _ = await run_comparable(flow, hooked=False)
    slow, _ = await run_comparable(flow, hooked=True)
    assert fast == slow
    steps = [(e[0], e[2]) for e in fast[-1] if e[0] in ("node_finished", "join_arrived")]
    assert steps == [
        ("node_finished", "fork"),
        ("node_finished", "x"),
        ("node_finished", "x1"),
        ("join_arrived", "j2"),
        ("node_finished", "y"),
        ("join_arrived", "j"),
        ("node_finished", "x2"),
        ("join_arrived", "j2"),
        ("join_arrived", "j"),
    ]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize("turns", [1, 3], ids=["before-first-step", "waiting"])
async def test_closing_the_engine_stops_the_suspended_branches(hooked: bool, turns: int) -> None:
    # The tasks of the branches that suspended are the engine's to stop, also before they
    # first ran: their nodes observe it where they wait.
    OBSERVED.clear()
    flow = split_of(MIXED)
    async with running(autojump=False, hooks=no_op_hooks(hooked)) as (engine, _clock):
        handle = await engine.start(flow)
        for _ in range(turns):
            await asyncio.sleep(0)
        await engine.close()
        with pytest.raises(Exception, match="closed"):
            await handle.result()
    # (One loop turn: the run's task split and handed the sleepers over; their tasks had not
    # run yet.)
    assert sorted(OBSERVED) == ["b1: None", "b4: None", "b6: None"]


THREADED_MIX: list[NodeImplementation] = [instant, threaded, sleeps, threaded, inline, threaded]


@pytest.mark.parametrize(
    ("mode", "quorum"), [("all", None), ("first", None), ("quorum", 3)], ids=["all", "first", "q3"]
)
async def test_threaded_branches_among_others_give_the_same_history_carried_or_as_tasks(
    mode: str, quorum: int | None, branch_tasks: BranchTasks
) -> None:
    """A split's branches that start at a threaded node get carriers where they got tasks: with
    eager branches and branches that suspend around them, every path gives the same history."""
    flow = split_of(THREADED_MIX, mode, quorum)
    outcomes = []
    for tasks in (False, True):
        branch_tasks(tasks)
        for hooked in (False, True):
            OBSERVED.clear()
            # One worker: the threaded branches finish in the order they started, on a busy
            # machine too (the arrival order below depends on it).
            outcome, _ = await run_comparable(flow, hooked=hooked, max_threads=1)
            outcomes.append((outcome, sorted(OBSERVED)))
    assert all(o == outcomes[0] for o in outcomes[1:])
    assert branch_tasks.carried == ["b1", "b3", "b5"] * 2  # each run, fast and general path
    (lifecycle, *_rest, events), _observed = outcomes[0]
    assert lifecycle is Lifecycle.COMPLETED
    arrived = [e[2] for e in events if e[0] == "node_finished" and e[2].startswith("b")]
    expected = {
        "all": ["b0", "b4", "b1", "b3", "b5", "b2"],
        "first": ["b0"],
        "quorum": ["b0", "b4", "b1"],
    }
    assert arrived == expected[mode]
