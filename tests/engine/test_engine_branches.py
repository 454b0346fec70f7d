"""A split's branches: the order they run in, and what reaches the ones that wait.

The branches of a split start in the order the split names them. A branch whose node does not
wait runs on to its join before the next branch starts, so the branches that do not wait arrive
in order, before any branch sleeping on the clock wakes up. A branch whose node waits is
reached where it waits by a run cancel, a run deadline, a ``first`` or quorum join's loser
cancellation, a sibling's failure and the engine's close: its node observes
``CancelledError``, with the reason. A branch cancelled before its turn never runs its node.
A hook that records every event changes nothing of a split's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine import EngineError, Lifecycle, NodeContext, Output
from flowtide.model import Flow
from flowtide.store import EventRecord
from tests.engine.engine_helpers import at, run_comparable, running

OBSERVED: list[str] = []
"""The sleepers that observed their cancellation, as ``"<placement>: <reason>"``."""
SLEEPING: list[str] = []
"""The sleepers whose node started and is waiting on the clock."""


@node(outputs=["done"])
async def instant(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"], execution="inline")
def inline(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
async def sleeps(ctx: NodeContext) -> Output:
    """Waits on the virtual clock: 1 s, or the branch's index in seconds."""
    ctx.state.setdefault("before", [])
    SLEEPING.append(ctx.placement)
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
    b = FlowBuilder(f"urn:test:flow:branches-{mode}-{shape}")
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


def nested_split() -> Flow:
    """``x`` splits again (into ``x1`` and ``x2``) while ``y``, of the outer split, waits for
    its turn; the inner join's token then arrives at the outer join."""
    return (
        FlowBuilder("urn:test:flow:branches-nested")
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


def _reset() -> None:
    OBSERVED.clear()
    SLEEPING.clear()


def _branches_finished(history: Sequence[EventRecord]) -> list[str]:
    """The branches (``b0``, ``b1``, ...) whose node finished, in order."""
    return [
        e.placement
        for e in history
        if e.kind == "node_finished" and e.placement is not None and e.placement.startswith("b")
    ]


@pytest.mark.parametrize(
    ("mode", "quorum"), [("all", None), ("first", None), ("quorum", 4)], ids=["all", "first", "q4"]
)
async def test_branches_that_do_not_wait_arrive_in_order_before_any_sleeper_wakes(
    mode: str, quorum: int | None
) -> None:
    _reset()
    async with running() as (engine, _clock):
        result = await engine.run(split_of(MIXED, mode, quorum))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    arrived = _branches_finished(history)
    if mode == "all":
        assert arrived == ["b0", "b2", "b3", "b5", "b7", "b1", "b4", "b6"]
        assert OBSERVED == []
    elif mode == "first":
        # b0 wins before the others start: they never run their node.
        assert arrived == ["b0"]
        assert SLEEPING == [] and OBSERVED == []
        assert result.state["visited"] == ["fork", "b0", "after"]
    else:
        assert arrived == ["b0", "b2", "b3", "b5"]
        # The sleepers that had started observe the cancel; b6 and b7 had not started when b5
        # made the quorum.
        assert SLEEPING == ["b1", "b4"]
        assert sorted(OBSERVED) == ["b1: join_loser", "b4: join_loser"]


async def test_a_first_join_loser_that_suspended_observes_its_cancellation() -> None:
    # b0 starts first and waits; b1 wins the join meanwhile.
    _reset()
    async with running() as (engine, _clock):
        result = await engine.run(split_of([sleeps, instant], "first"))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert OBSERVED == ["b0: join_loser"]
    assert result.state["visited"] == ["fork", "b1", "after"]
    assert "before" not in result.state
    cancelled = [(e.placement, e.data["reason"]) for e in history if e.kind == "token_cancelled"]
    assert cancelled == [("b0", "join_loser")]


async def test_a_run_cancel_reaches_the_suspended_branches_not_the_finished_ones() -> None:
    _reset()
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(split_of(MIXED))
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


async def test_a_run_deadline_reaches_the_suspended_branches() -> None:
    # b1 sleeps 1 s and arrives; b4 and b6 sleep 4 s and 6 s: the deadline at 3 s cancels them.
    _reset()
    async with running() as (engine, _clock):
        result = await engine.run(split_of(MIXED), deadline=timedelta(seconds=3))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert sorted(OBSERVED) == ["b4: run_deadline", "b6: run_deadline"]
    assert result.interrupted_at is not None
    assert result.interrupted_at.at == at(3)
    assert result.state["visited"] == ["fork", "b0", "b2", "b3", "b5", "b7", "b1"]
    assert history[-1].kind == "run_finished" and history[-1].at == at(3)


@pytest.mark.parametrize(
    ("kinds", "observed"),
    [
        # b0 and b1 wait when b2 fails: both observe the run's end; b3 never runs.
        ([sleeps, sleeps, fails_at_once, instant], ["b0: run_ended", "b1: run_ended"]),
        # Only b0 waits; b3 and b4 come after the failure and never run.
        ([sleeps, inline, fails_at_once, instant, sleeps], ["b0: run_ended"]),
    ],
    ids=["two-waiting", "one-waiting"],
)
async def test_a_branch_failing_in_its_first_step_fails_the_run(
    kinds: list[NodeImplementation], observed: list[str]
) -> None:
    _reset()
    async with running() as (engine, _clock):
        result = await engine.run(split_of(kinds))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.placement) for e in result.errors] == [("ValueError", "b2")]
    assert sorted(OBSERVED) == observed
    assert "b3" not in result.state.get("visited", [])
    assert [e.placement for e in history if e.kind == "node_failed"] == ["b2"]
    assert not {"b3", "b4"} & set(_branches_finished(history))


CANCEL: list[Callable[[], object]] = []


@node(outputs=["done"], execution="inline")
def cancels_the_run(ctx: NodeContext) -> Output:
    CANCEL[0]()
    return Output("done", update={"visited": [ctx.placement]})


async def test_a_run_cancelled_by_a_branchs_node_stops_its_siblings() -> None:
    # b0 and b1 wait; b2's node cancels the run: the waiting ones observe it, b2's own step
    # commits nothing, b3 never runs.
    _reset()
    async with running() as (engine, _clock):
        handle = await engine.start(split_of([sleeps, sleeps, cancels_the_run, instant]))
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
@pytest.mark.parametrize("width", [2, 50])
async def test_a_wide_split_of_plain_branches_arrives_in_order(
    kind: NodeImplementation, width: int
) -> None:
    async with running() as (engine, _clock):
        result = await engine.run(split_of([kind] * width))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    branches = [f"b{i}" for i in range(width)]
    assert result.state["visited"] == ["fork", *branches, "after"]
    steps = [(e.kind, e.placement) for e in history]
    assert steps[:3] == [("run_started", None), ("node_started", "fork"), ("node_finished", "fork")]
    # Each branch, in order: its move and its arrival at the join, one after the other; the
    # join fires after the last arrival.
    moves = [s for s in steps if s[0] in ("node_finished", "join_arrived", "join_fired")]
    assert moves[1:] == [
        *[pair for b in branches for pair in (("node_finished", b), ("join_arrived", "j"))],
        ("join_fired", "j"),
        ("node_finished", "after"),
    ]
    for b in branches:
        assert steps.index(("node_started", b)) < steps.index(("node_finished", b))
    assert steps[-4:] == [
        ("node_started", "after"),
        ("node_finished", "after"),
        ("terminal_reached", "end"),
        ("run_finished", None),
    ]


async def test_a_branch_that_splits_again_queues_its_new_branches_behind_the_others() -> None:
    # x1 goes on at once in x's place; x2 comes after y, which was waiting for its turn.
    async with running() as (engine, _clock):
        result = await engine.run(nested_split())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    steps = [(e.kind, e.placement) for e in history if e.kind in ("node_finished", "join_arrived")]
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


@pytest.mark.parametrize("when", ["at-once", "waiting"])
async def test_closing_the_engine_stops_the_suspended_branches(when: str) -> None:
    # Closed one loop turn after the start, or once the three sleepers wait: each sleeper that
    # started observes the close where it waits (with no reason: the run is not ended, only no
    # longer run here), nothing more happens, and the run is left in the store, to be resumed.
    _reset()
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(split_of(MIXED))
        await asyncio.sleep(0)
        if when == "waiting":
            for _ in range(1000):
                if len(SLEEPING) == 3:
                    break
                await asyncio.sleep(0)
            assert SLEEPING == ["b1", "b4", "b6"]
        await engine.close()
        with pytest.raises(EngineError, match="closed"):
            await handle.result()
        assert (await engine.store.get_run(handle.run_id)).lifecycle == Lifecycle.RUNNING
        history = list(await engine.history(handle.run_id))
        await clock.advance(timedelta(seconds=10))
        assert list(await engine.history(handle.run_id)) == history
    assert sorted(OBSERVED) == [f"{p}: None" for p in sorted(SLEEPING)]


@pytest.mark.parametrize(
    ("make", "deadline"),
    [
        (lambda: split_of(MIXED), None),
        (lambda: split_of(MIXED, "first"), None),
        (lambda: split_of(MIXED, "quorum", 4), None),
        (lambda: split_of(MIXED), timedelta(seconds=3)),
        (lambda: split_of([sleeps, inline, fails_at_once, instant, sleeps]), None),
        (lambda: split_of([instant] * 30), None),
        (lambda: split_of([inline] * 30), None),
        (nested_split, None),
    ],
    ids=["all", "first", "q4", "deadline", "failing", "wide-async", "wide-inline", "nested"],
)
async def test_a_hook_changes_nothing_in_a_splits_history(
    make: Callable[[], Flow], deadline: timedelta | None
) -> None:
    flow = make()
    _reset()
    plain, _ = await run_comparable(flow, hooked=False, deadline=deadline)
    observed = sorted(OBSERVED)
    _reset()
    hooked, _ = await run_comparable(flow, hooked=True, deadline=deadline)
    assert hooked == plain
    assert sorted(OBSERVED) == observed
