"""Joins: all, first (losers cancelled and observing it), quorum; success / error routes."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import at, of_kind, running

log: list[str] = []


@node(outputs=["go"], execution="inline")
def fork(ctx: NodeContext) -> str:
    return "go"


def sleeper(name: str, seconds: float) -> object:
    @node(id=f"test:sleeper:{name}", outputs=["done"])
    async def run(ctx: NodeContext) -> str:
        try:
            await ctx.clock.sleep(timedelta(seconds=seconds))
        except asyncio.CancelledError:
            log.append(f"{name} cancelled ({ctx.cancel_reason}) at {ctx.now().isoformat()}")
            raise
        ctx.state[name] = seconds
        ctx.state.setdefault("order", []).append(name)
        return "done"

    return run


@node(outputs=["done"], execution="inline")
def after(ctx: NodeContext) -> str:
    ctx.state["after"] = ctx.state.get("after", 0) + 1
    return "done"


def join_flow(mode: str, durations: dict[str, float], quorum: int | None = None) -> FlowBuilder:
    b = FlowBuilder(f"urn:test:flow:join-{mode}")
    b.task("fork", fork, {"go": list(durations)})
    for name, seconds in durations.items():
        b.task(name, sleeper(name, seconds), {"done": "j"})  # type: ignore[arg-type]
    b.join("j", mode, {"success": "after", "error": "failed-end"}, quorum=quorum)
    b.task("after", after, {"done": "end"})
    b.terminal("end")
    b.terminal("failed-end", outcome="partial")
    b.reducer("order", "extend")
    return b


async def test_all_join_waits_for_every_branch_and_merges_state() -> None:
    log.clear()
    async with running() as (engine, _clock):
        result = await engine.run(join_flow("all", {"a": 3, "b": 5}).build())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"a": 3, "b": 5, "order": ["a", "b"], "after": 1}
    (fired,) = of_kind(history, "join_fired")
    assert fired.at == at(5)
    assert (fired.data["output"], fired.data["arrived"]) == ("success", 2)
    assert log == []


async def test_first_join_cancels_the_loser_which_observes_it() -> None:
    log.clear()
    async with running() as (engine, _clock):
        result = await engine.run(join_flow("first", {"fast": 1, "slow": 100}).build())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"fast": 1, "order": ["fast"], "after": 1}
    assert log == [f"slow cancelled (join_loser) at {at(1).isoformat()}"]
    cancelled = of_kind(history, "token_cancelled")
    assert [(e.placement, e.data["reason"]) for e in cancelled] == [("slow", "join_loser")]
    assert history[-1].kind == "run_finished" and history[-1].at == at(1)


async def test_first_join_drops_a_losing_branch_waiting_on_a_timer() -> None:
    store = MemoryStore()
    flow = (
        FlowBuilder("urn:test:flow:first-wait")
        .task("fork", fork, {"go": ["fast", "nap"]})
        .task("fast", sleeper("fast", 1), {"done": "j"})  # type: ignore[arg-type]
        .wait("nap", "PT1H", then="j")
        .join("j", "first", {"success": "end"})
        .terminal("end")
        .build()
    )
    async with running(store=store) as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert store.due_entries() == []
    assert [(e.placement, e.data["reason"]) for e in of_kind(history, "token_cancelled")] == [
        ("nap", "join_loser")
    ]
    assert of_kind(history, "timer_fired") == []
    assert history[-1].at == at(1)


async def test_quorum_join_fires_at_the_nth_arrival_and_cancels_the_rest() -> None:
    log.clear()
    async with running() as (engine, _clock):
        flow = join_flow("quorum", {"x": 1, "y": 2, "z": 10}, quorum=2).build()
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["order"] == ["x", "y"]
    (fired,) = of_kind(history, "join_fired")
    assert (fired.at, fired.data["arrived"]) == (at(2), 2)
    assert log == [f"z cancelled (join_loser) at {at(2).isoformat()}"]


@node(outputs=["join", "skip"], execution="inline")
def skipper(ctx: NodeContext) -> str:
    return "skip"


async def test_all_join_routes_error_when_a_branch_can_no_longer_arrive() -> None:
    flow = (
        FlowBuilder("urn:test:flow:join-error")
        .task("fork", fork, {"go": ["a", "elsewhere"]})
        .task("a", sleeper("a", 3), {"done": "j"})  # type: ignore[arg-type]
        .task("elsewhere", skipper, {"join": "j", "skip": "side-end"})
        .join("j", "all", {"success": "end", "error": "partial-end"})
        .terminal("end")
        .terminal("side-end")
        .terminal("partial-end", outcome="partial")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    (fired,) = of_kind(history, "join_fired")
    assert (fired.data["output"], fired.data["arrived"]) == ("error", 1)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.terminals == ("side-end", "partial-end")


async def test_join_routes_empty_when_no_branch_arrived_and_none_can() -> None:
    flow = (
        FlowBuilder("urn:test:flow:join-empty")
        .task("fork", fork, {"go": ["a", "b"]})
        .task("a", skipper, {"join": "j", "skip": "side-a"})
        .task("b", skipper, {"join": "j", "skip": "side-b"})
        .join("j", "all", {"success": "end", "error": "partial-end", "empty": "empty-end"})
        .terminal("end")
        .terminal("side-a")
        .terminal("side-b")
        .terminal("partial-end", outcome="partial")
        .terminal("empty-end", outcome="empty")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    (fired,) = of_kind(history, "join_fired")
    assert (fired.data["output"], fired.data["arrived"], fired.data["branches"]) == ("empty", 0, [])
    assert fired.data["to"] == ["empty-end"]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert sorted(result.terminals) == ["empty-end", "side-a", "side-b"]


async def test_join_waits_for_a_branch_that_can_still_arrive_before_empty() -> None:
    """One branch ended elsewhere, the other is still on its way: neither empty nor error yet;
    once it arrives, too few branches can arrive: error with that one."""
    flow = (
        FlowBuilder("urn:test:flow:join-late")
        .task("fork", fork, {"go": ["a", "elsewhere"]})
        .task("a", sleeper("late-a", 3), {"done": "j"})  # type: ignore[arg-type]
        .task("elsewhere", skipper, {"join": "j", "skip": "side-end"})
        .join("j", "all", {"success": "end", "error": "partial-end", "empty": "empty-end"})
        .terminal("end")
        .terminal("side-end")
        .terminal("partial-end", outcome="partial")
        .terminal("empty-end", outcome="empty")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    (fired,) = of_kind(history, "join_fired")
    assert (fired.data["output"], fired.data["arrived"]) == ("error", 1)
    assert fired.at == at(3)
    assert result.terminals == ("side-end", "partial-end")


async def test_nested_split_branches_lost_route_empty_at_the_outer_join_only() -> None:
    flow = (
        FlowBuilder("urn:test:flow:join-nested-empty")
        .task("fork", fork, {"go": ["a", "inner-fork"]})
        .task("a", skipper, {"join": "outer", "skip": "side-a"})
        .task("inner-fork", fork, {"go": ["x", "y"]})
        .task("x", after, {"done": "inner"})
        .task("y", after, {"done": "inner"})
        .join("inner", "all", {"success": "leave"})
        .task("leave", skipper, {"join": "outer", "skip": "side-b"})
        .join("outer", "all", {"success": "end", "error": "end", "empty": "empty-end"})
        .terminal("end")
        .terminal("side-a")
        .terminal("side-b")
        .terminal("empty-end", outcome="empty")
        .reducer("after", "sum")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    fired = [(e.placement, e.data["output"]) for e in of_kind(history, "join_fired")]
    assert fired == [("inner", "success"), ("outer", "empty")]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert sorted(result.terminals) == ["empty-end", "side-a", "side-b"]


async def test_join_that_routes_no_empty_output_is_not_fired_when_no_branch_arrived() -> None:
    flow = (
        FlowBuilder("urn:test:flow:join-no-empty-route")
        .task("fork", fork, {"go": ["a", "b"]})
        .task("a", skipper, {"join": "j", "skip": "side-a"})
        .task("b", skipper, {"join": "j", "skip": "side-b"})
        .join("j", "all", {"success": "end", "error": "end"})
        .terminal("end")
        .terminal("side-a")
        .terminal("side-b")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert of_kind(history, "join_fired") == []
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.terminals == ("side-a", "side-b")


async def test_race_first_join_arrivals_at_the_same_instant() -> None:
    async with running() as (engine, _clock):
        flow = join_flow("first", {"p": 1, "q": 1}).build()
        for _ in range(30):
            result = await engine.run(flow)
            history = await engine.history(result.run_id)
            assert result.lifecycle is Lifecycle.COMPLETED
            assert result.state["after"] == 1
            assert len(result.state["order"]) == 1
            assert len(of_kind(history, "join_fired")) == 1
            # The other branch either never arrived (cancelled) or was cancelled mid-way.
            finished = {e.placement for e in of_kind(history, "node_finished")}
            assert len(finished & {"p", "q"}) == 1
