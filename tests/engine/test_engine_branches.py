"""A split's branches: the order they run in, and what reaches the ones that wait.

The branches of a split start in the order the split names them and run at the same time: the
branches whose node does not wait all arrive before any branch sleeping on the clock wakes up.
A branch whose node waits is
reached where it waits by a run cancel, a run deadline, a ``first`` or quorum join's loser
cancellation, a sibling's failure and the engine's close: its node observes
``CancelledError``, with the reason. A hook that records every event changes nothing of a
split's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine import EngineError, Lifecycle, NodeContext, Output
from flowtide.model import Flow
from tests.engine.engine_helpers import (
    at,
    branches_finished,
    inline,
    instant,
    mark,
    run_comparable,
    running,
    split_of,
)

OBSERVED: list[str] = []
"""The sleepers that observed their cancellation, as ``"<placement>: <reason>"``."""
SLEEPING: list[str] = []
"""The sleepers whose node started and is waiting on the clock."""


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
    arrived = branches_finished(history)
    quick = {"b0", "b2", "b3", "b5", "b7"}
    if mode == "all":
        assert set(arrived[:5]) == quick
        assert arrived[5:] == ["b1", "b4", "b6"]  # by the time each one sleeps
        assert OBSERVED == []
        return
    joined = [e for e in history if e.kind == "join_fired"]
    assert len(joined) == 1 and joined[0].data["output"] == "success"
    winners = {f"b{b}" for b in joined[0].data["branches"]}
    assert len(winners) == (1 if mode == "first" else 4) and winners <= quick
    # Every sleeper that had started observes the cancel; no sleeper finished.
    assert sorted(OBSERVED) == [f"{b}: join_loser" for b in sorted(SLEEPING)]
    assert not {"b1", "b4", "b6"} & set(arrived)
    assert result.state["visited"].count("after") == 1


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
        ([sleeps, sleeps, fails_at_once, instant], ["b0", "b1"]),
        ([sleeps, inline, fails_at_once, instant, sleeps], ["b0", "b4"]),
    ],
    ids=["two-waiting", "one-waiting"],
)
async def test_a_branch_failing_in_its_first_step_fails_the_run(
    kinds: list[NodeImplementation], observed: list[str]
) -> None:
    # The sleepers wait when b2 fails: each that started observes the run's end.
    _reset()
    async with running() as (engine, _clock):
        result = await engine.run(split_of(kinds))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.placement) for e in result.errors] == [("ValueError", "b2")]
    assert sorted(OBSERVED) == [f"{b}: run_ended" for b in sorted(SLEEPING)]
    assert set(SLEEPING) <= set(observed)
    assert [e.placement for e in history if e.kind == "node_failed"] == ["b2"]
    assert not set(observed) & set(branches_finished(history))
    assert history[-1].kind == "run_finished"


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
    # Every branch finishes and arrives (each its node's end before its arrival); the join
    # fires once, after the last arrival.
    arrivals = [s for s in steps if s[0] == "join_arrived"]
    assert len(arrivals) == width
    fired = steps.index(("join_fired", "j"))
    assert all(steps.index(("node_finished", b)) < fired for b in branches)
    assert max(i for i, s in enumerate(steps) if s[0] == "join_arrived") < fired
    for b in branches:
        assert steps.index(("node_started", b)) < steps.index(("node_finished", b))
    assert steps[-4:] == [
        ("node_started", "after"),
        ("node_finished", "after"),
        ("terminal_reached", "end"),
        ("run_finished", None),
    ]


async def test_a_branch_that_splits_again_is_joined_innermost_first() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(nested_split())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    steps = [(e.kind, e.placement) for e in history]
    inner = [i for i, s in enumerate(steps) if s == ("join_arrived", "j2")]
    outer = [i for i, s in enumerate(steps) if s == ("join_arrived", "j")]
    assert len(inner) == 2 and len(outer) == 2
    # x1 and x2 arrive at j2 before its token goes on to j; y arrives at j on its own.
    assert max(inner) < steps.index(("join_fired", "j2")) < max(outer)
    assert steps.count(("join_fired", "j")) == 1
    assert sorted(result.state["visited"]) == ["fork", "x", "x1", "x2", "y"]


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
