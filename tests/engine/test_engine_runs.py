"""Runs: hook order, outputs, drained runs, lifecycle, reducers, concurrency."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, LifecycleError, NodeContext, Output
from flowtide.engine.lifecycle import transition
from flowtide.errors import NodeResolutionError
from flowtide.store import EventRecord
from tests.engine.engine_helpers import at, kinds, of_kind, raw_flow, running


@node(outputs=["next"], execution="inline")
def first(ctx: NodeContext) -> str:
    ctx.state["visited"] = ["first"]
    return "next"


@node(outputs=["done"])
async def second(ctx: NodeContext) -> Output:
    return Output("done", update={"answer": 42})


def small_flow() -> FlowBuilder:
    return (
        FlowBuilder("urn:test:flow:small")
        .task("a", first, {"next": "b"})
        .task("b", second, {"done": "end"})
        .terminal("end")
    )


async def test_hook_order_for_a_small_flow() -> None:
    seen: list[tuple[str, str | None, int | None]] = []
    async_seen: list[str] = []

    def hook(e: EventRecord) -> None:
        seen.append((e.kind, e.placement, e.attempt))

    async def async_hook(e: EventRecord) -> None:
        await asyncio.sleep(0)
        async_seen.append(e.kind)

    async with running(hooks=[hook, async_hook]) as (engine, _clock):
        result = await engine.run(small_flow().build())
        history = await engine.history(result.run_id)
    assert seen == [
        ("run_started", None, None),
        ("node_started", "a", 1),
        ("node_finished", "a", 1),
        ("node_started", "b", 1),
        ("node_finished", "b", 1),
        ("terminal_reached", "end", 1),
        ("run_finished", None, None),
    ]
    assert async_seen == [k for k, _, _ in seen]
    assert [e.kind for e in history] == [k for k, _, _ in seen]
    assert [e.seq for e in history] == list(range(1, 8))
    assert history[2].data == {"output": "next", "to": ["b"]}
    assert all(e.run_id == result.run_id for e in history)
    assert result.state == {"visited": ["first"], "answer": 42}


async def test_a_failing_hook_does_not_break_the_run_and_is_recorded() -> None:
    def bad(e: EventRecord) -> None:
        if e.kind == "node_started":
            raise RuntimeError("hook broke")

    async with running(hooks=[bad]) as (engine, _clock):
        result = await engine.run(small_flow().build())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    failed = of_kind(history, "hook_failed")
    assert len(failed) == 2
    assert failed[0].data["error"] == "RuntimeError: hook broke"


@node(outputs=["yes", "no"], execution="inline")
def says_maybe(ctx: NodeContext) -> str:
    return "maybe"


async def test_undeclared_output_fails_the_run_at_that_placement() -> None:
    flow = (
        FlowBuilder("urn:test:flow:undeclared")
        .task("ask", says_maybe, {"yes": "end", "no": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.FAILED
    (err,) = result.errors
    assert (err.type, err.placement) == ("UndeclaredOutputError", "ask")
    assert "says_maybe" in err.message
    assert "'ask'" in err.message and "'maybe'" in err.message
    assert "declared: yes, no" in err.message


@node(outputs=["yes", "no"], execution="inline")
def says_no(ctx: NodeContext) -> str:
    return "no"


async def test_output_without_a_route_fails_with_a_clear_error() -> None:
    flow = raw_flow(
        [
            {"kind": "task", "id": "ask", "node": says_no.id, "routes": {"yes": "end"}},
            {"kind": "terminal", "id": "end"},
        ]
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.FAILED
    (err,) = result.errors
    assert err.type == "UnroutedOutputError"
    assert err.message == (
        "placement 'ask' took output 'no', which has no route (routed outputs: yes)"
    )


@node(outputs=["done"], execution="inline")
def noop(ctx: NodeContext) -> None:
    return None


async def test_a_run_that_stops_without_a_terminal_fails() -> None:
    flow = raw_flow(
        [
            {"kind": "task", "id": "a", "node": noop.id, "routes": {"done": "cleanup"}},
            {"kind": "phase", "id": "cleanup", "node": noop.id, "phase": "post"},
        ]
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.FAILED
    assert result.outcome is None
    (err,) = result.errors
    assert err.type == "DrainedWithoutTerminal"
    assert "without reaching any terminal" in err.message


async def test_a_failed_terminal_fails_the_run() -> None:
    flow = (
        FlowBuilder("urn:test:flow:failed-terminal")
        .task("a", noop, {"done": "bad"})
        .terminal("bad", outcome="failed")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.FAILED
    assert result.outcome == "failed"
    assert [e.type for e in result.errors] == ["FailedTerminalError"]


async def test_custom_outcome_completes_the_run() -> None:
    flow = (
        FlowBuilder("urn:test:flow:custom")
        .task("a", noop, {"done": "ok"})
        .terminal("ok", outcome="approved")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert (result.lifecycle, result.outcome, result.interrupted_at) == (
        Lifecycle.COMPLETED,
        "approved",
        None,
    )


def test_terminal_lifecycles_refuse_transitions() -> None:
    assert transition("pending", "running") is Lifecycle.RUNNING
    assert transition("running", "parked") is Lifecycle.PARKED
    for end in ("completed", "failed", "cancelled", "timed_out"):
        for wanted in Lifecycle:
            with pytest.raises(LifecycleError):
                transition(end, wanted)
    with pytest.raises(LifecycleError):
        transition("pending", "completed")


@node(outputs=["go"], execution="inline")
def fork(ctx: NodeContext) -> str:
    return "go"


def writer(name: str) -> object:
    @node(id=f"test:writer:{name}", outputs=["done"])
    async def run(ctx: NodeContext) -> str:
        await ctx.clock.sleep(timedelta(seconds=1 if name == "x" else 2))
        ctx.state["last"] = name
        ctx.state["items"].append(name)
        ctx.state["total"] += 10 if name == "x" else 1
        ctx.state["meta"][name] = True
        return "done"

    return run


async def test_parallel_writes_merge_by_reducer_or_last_commit_wins() -> None:
    flow = (
        FlowBuilder("urn:test:flow:reducers")
        .task("fork", fork, {"go": ["x", "y"]})
        .task("x", writer("x"), {"done": "j"})  # type: ignore[arg-type]
        .task("y", writer("y"), {"done": "j"})  # type: ignore[arg-type]
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .reducer("items", "append")
        .reducer("total", "sum")
        .reducer("meta", "merge")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"items": [], "total": 0, "meta": {}})
    assert result.state == {
        "items": ["x", "y"],
        "total": 11,
        "meta": {"x": True, "y": True},
        "last": "y",
    }


def custom_reducer(current: object, value: object) -> object:
    return f"{current}+{value}"


async def test_custom_reducer_function() -> None:
    from flowtide.engine.state.reducers import StateMerger

    ref = "tests.engine.test_engine_runs:custom_reducer"
    m = StateMerger({"k": ref}, {ref: custom_reducer})
    state = {"k": "a"}
    m.apply(state, {"k": "a"}, {"k": "b"}, [], {})
    assert state == {"k": "a+b"}
    # A reducer no engine bound is never imported by its name.
    unbound = StateMerger({"k": ref})
    with pytest.raises(NodeResolutionError, match="is not registered"):
        unbound.apply(state, {"k": "a"}, {"k": "b"}, [], {})


async def test_many_runs_concurrently_with_concurrent_branches() -> None:
    flow = (
        FlowBuilder("urn:test:flow:many")
        .task("fork", fork, {"go": ["x", "y"]})
        .task("x", writer("x"), {"done": "j"})  # type: ignore[arg-type]
        .task("y", writer("y"), {"done": "j"})  # type: ignore[arg-type]
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        handles = [
            await engine.start(flow, {"items": [], "total": 0, "meta": {}}) for _ in range(100)
        ]
        results = [await h.result() for h in handles]
        histories = [await engine.history(r.run_id) for r in results]
    assert {r.lifecycle for r in results} == {Lifecycle.COMPLETED}
    for history in histories:
        starts = {e.placement: e.at for e in of_kind(history, "node_started")}
        # Both branches started at once: they ran concurrently, not one after the other.
        assert starts["x"] == starts["y"] == at(0)
        assert history[-1].at == at(2)


barrier = threading.Barrier(2, timeout=5)


@node(outputs=["done"])
def threaded(ctx: NodeContext) -> str:
    barrier.wait()  # only returns when both branches are running at the same time
    return "done"


async def test_sync_branches_run_in_parallel_threads() -> None:
    flow = (
        FlowBuilder("urn:test:flow:threads")
        .task("fork", fork, {"go": ["t1", "t2"]})
        .task("t1", threaded, {"done": "j"})
        .task("t2", threaded, {"done": "j"})
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.COMPLETED


@node(outputs=["elapsed"], execution="inline")
def never(ctx: NodeContext) -> str:
    return "elapsed"


async def test_wait_placements_fire_as_due_instants() -> None:
    from datetime import UTC, datetime

    flow = (
        FlowBuilder("urn:test:flow:waits")
        .wait("ten", "PT10M", then="until")
        .wait("until", until=datetime(2026, 1, 1, 1, 0, tzinfo=UTC), then="end")
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    fired = of_kind(history, "timer_fired")
    assert [(e.placement, e.at) for e in fired] == [("ten", at(600)), ("until", at(3600))]
    assert kinds(history, placement="ten") == ["wait_started", "timer_fired"]


def test_transition_by_member_or_value_as_lifecycle_calls_say() -> None:
    from flowtide.engine.lifecycle import _ALLOWED

    names = [m.value for m in Lifecycle]
    for current in [*Lifecycle, *names]:
        for wanted in [*Lifecycle, *names]:
            cur, new = Lifecycle(current), Lifecycle(wanted)
            if new in _ALLOWED.get(cur, frozenset()):
                assert transition(current, wanted) is new
            else:
                with pytest.raises(LifecycleError):
                    transition(current, wanted)
    for bad in ("bogus", "", "PARKED"):
        with pytest.raises(ValueError, match="is not a valid Lifecycle"):
            transition(bad, "running")
        with pytest.raises(ValueError, match="is not a valid Lifecycle"):
            transition("running", bad)
