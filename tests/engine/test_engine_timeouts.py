"""Per-node timeouts cancel only their node; run deadlines and aborts cancel every node."""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext
from flowtide.model import Flow
from tests.engine.engine_helpers import at, kinds, of_kind, running

observed: list[str] = []


@node(outputs=["done"], timeout="PT5S")
async def slow_a(ctx: NodeContext) -> str:
    try:
        await ctx.clock.sleep(timedelta(seconds=60))
    except asyncio.CancelledError:
        observed.append(f"a cancelled at {ctx.now().isoformat()}")
        raise
    ctx.state["a"] = "finished"
    return "done"


@node(outputs=["done"])
async def sibling_b(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(seconds=10))
    ctx.state["b"] = "finished"
    return "done"


@node(outputs=["go"], execution="inline")
def fork(ctx: NodeContext) -> str:
    return "go"


def split_flow(*, route_timeout: bool) -> Flow:
    a_routes = {"done": "end"}
    if route_timeout:
        a_routes["timeout"] = "end"
    return (
        FlowBuilder("urn:test:flow:split-timeout")
        .task("fork", fork, {"go": ["a", "b"]})
        .task("a", slow_a, a_routes)
        .task("b", sibling_b, {"done": "end"})
        .terminal("end")
        .build()
    )


async def test_node_timeout_while_sibling_keeps_running_and_completes() -> None:
    observed.clear()
    async with running() as (engine, _clock):
        result = await engine.run(split_flow(route_timeout=True))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.interrupted_at is None
    assert result.state == {"b": "finished"}
    assert observed == [f"a cancelled at {at(5).isoformat()}"]
    (timed_out,) = of_kind(history, "node_timed_out")
    assert timed_out.placement == "a"
    assert timed_out.at == at(5)
    assert timed_out.data["routed"] is True
    b_done = [e for e in of_kind(history, "node_finished") if e.placement == "b"]
    assert [e.at for e in b_done] == [at(10)]
    assert of_kind(history, "token_cancelled") == []
    assert [e.at for e in of_kind(history, "run_finished")] == [at(10)]


async def test_unrouted_node_timeout_fails_the_run_with_node_timeout_error() -> None:
    observed.clear()
    async with running() as (engine, _clock):
        result = await engine.run(split_flow(route_timeout=False))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.type for e in result.errors] == ["NodeTimeoutError"]
    assert result.errors[0].placement == "a"
    assert "exceeded its timeout of PT5S" in result.errors[0].message
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.node) == ("timeout", "a")
    assert result.interrupted_at.at == at(5)
    assert len(of_kind(history, "node_timed_out")) == 1
    # The run failed, so the sibling was cancelled by the run's end (not by the timeout).
    cancelled = of_kind(history, "token_cancelled")
    assert [(e.placement, e.data["reason"]) for e in cancelled] == [("b", "run_ended")]


async def test_explain_after_an_unrouted_timeout_failed_the_run() -> None:
    observed.clear()
    async with running() as (engine, _clock):
        result = await engine.run(split_flow(route_timeout=False))
        timed_out = await engine.explain(result.run_id, placement="a")
        sibling = await engine.explain(result.run_id, placement="b")
        by_token = await engine.explain(result.run_id, token_id=timed_out.token_id)
    assert (timed_out.anchor.value, timed_out.anchor_at, timed_out.deadline) == (
        "park",
        at(0),
        at(5),
    )
    assert (timed_out.ending, timed_out.ended_at, timed_out.ended_by) == ("timed_out", at(5), None)
    assert "timed out at 2026-01-01T00:00:05+00:00, with no 'timeout' route: the run failed" in (
        str(timed_out)
    )
    assert (sibling.timeout, sibling.ending, sibling.ended_by) == (None, "cancelled", "run_ended")
    assert by_token == timed_out


async def test_hooks_see_exactly_one_timed_out_event() -> None:
    seen: list[str] = []
    async with running(hooks=[lambda e: seen.append(e.kind)]) as (engine, _clock):
        await engine.run(split_flow(route_timeout=True))
    assert seen.count("node_timed_out") == 1


release_sync = threading.Event()
saw_cancelled: list[bool] = []
sync_started = threading.Event()


@node(outputs=["late", "fine"], timeout="PT2S")
def blocking_sync(ctx: NodeContext) -> str:
    sync_started.set()
    release_sync.wait(10)
    saw_cancelled.append(ctx.cancelled)
    ctx.state["touched"] = True
    return "late"


@node(outputs=["done"], execution="inline")
def after_timeout(ctx: NodeContext) -> str:
    ctx.state["after"] = ctx.state.get("touched", "untouched")
    return "done"


async def test_sync_node_past_its_timeout_has_its_late_result_ignored() -> None:
    release_sync.clear()
    sync_started.clear()
    saw_cancelled.clear()
    flow = (
        FlowBuilder("urn:test:flow:sync-timeout")
        .task("s", blocking_sync, {"late": "late-end", "fine": "late-end", "timeout": "after"})
        .task("after", after_timeout, {"done": "end"})
        .terminal("late-end", outcome="late")
        .terminal("end")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(flow, {"x": 1})
        await asyncio.to_thread(sync_started.wait, 10)
        await clock.advance(timedelta(seconds=2))
        result = await handle.result()
        # Now let the thread finish: its result must not be applied anywhere.
        release_sync.set()
        await asyncio.to_thread(engine.threads.shutdown, wait=True)
        history = await engine.history(result.run_id)
    assert saw_cancelled == [True]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "completed"
    assert result.state == {"x": 1, "after": "untouched"}
    outputs = [e.data.get("output") for e in of_kind(history, "node_finished")]
    assert outputs == ["done"]
    assert kinds(history, placement="s") == ["node_started", "node_timed_out"]


@node(outputs=["done"], timeout="PT3S", execution="process")
def process_sleeper(ctx: object) -> str:
    import time

    time.sleep(60)
    return "done"


async def test_process_isolated_node_is_killed_at_its_deadline() -> None:
    flow = (
        FlowBuilder("urn:test:flow:process-timeout")
        .task("p", process_sleeper, {"done": "end"})
        .terminal("end")
        .build()
    )
    started = asyncio.Event()
    pids: list[int] = []

    def hook(event: object) -> None:
        if getattr(event, "kind", None) == "process_started":
            pids.append(event.data["pid"])  # type: ignore[attr-defined]
            started.set()

    async with running(autojump=False, hooks=[hook]) as (engine, clock):
        handle = await engine.start(flow)
        await started.wait()
        await clock.advance(timedelta(seconds=3))
        result = await handle.result()
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.type for e in result.errors] == ["NodeTimeoutError"]
    assert result.interrupted_at is not None and result.interrupted_at.at == at(3)
    (pid,) = pids
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        gone = True
    else:
        gone = False
    assert gone, f"process {pid} is still alive"


@node(outputs=["done"], timeout="PT60S")
async def long_budget(ctx: NodeContext) -> str:
    try:
        await ctx.clock.sleep(timedelta(minutes=10))
    except asyncio.CancelledError:
        observed.append(f"cancelled: {ctx.cancel_reason}")
        raise
    return "done"


def long_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:long")
        .task("long", long_budget, {"done": "end", "timeout": "end"})
        .terminal("end")
        .build()
    )


async def test_run_abort_wins_over_a_longer_node_timeout() -> None:
    observed.clear()
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(long_flow())
        await clock.advance(timedelta(seconds=10))
        assert handle.cancel(reason="operator stop")
        await clock.advance(timedelta(seconds=60))
        result = await handle.result()
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.interrupted_at is not None
    assert result.interrupted_at.reason == "abort"
    assert result.interrupted_at.node == "long"
    assert result.interrupted_at.at == at(10)
    assert observed == ["cancelled: abort"]
    assert of_kind(history, "node_timed_out") == []
    assert [e.type for e in result.errors] == ["RunCancelled"]
    assert result.errors[0].message == "operator stop"


async def test_run_deadline_times_the_run_out() -> None:
    observed.clear()
    async with running() as (engine, _clock):
        result = await engine.run(long_flow(), deadline=timedelta(seconds=30))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None
    assert result.interrupted_at.reason == "timeout"
    assert result.interrupted_at.node == "long"
    assert result.interrupted_at.at == at(30)
    assert observed == ["cancelled: run_deadline"]
    assert of_kind(history, "node_timed_out") == []
    assert history[-1].kind == "run_finished" and history[-1].at == at(30)


async def test_flow_default_deadline_applies() -> None:
    flow = (
        FlowBuilder("urn:test:flow:long-default")
        .task("long", long_budget, {"done": "end", "timeout": "end"})
        .terminal("end")
        .deadline("PT20S")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None and result.interrupted_at.at == at(20)


ran: list[str] = []


@node(outputs=["done"], execution="inline")
def must_not_run(ctx: NodeContext) -> str:
    ran.append(ctx.placement)
    return "done"


async def test_cancel_before_start_runs_no_node() -> None:
    ran.clear()
    flow = (
        FlowBuilder("urn:test:flow:never")
        .phase("pre", "pre", must_not_run)
        .phase("post", "post", must_not_run)
        .task("first", must_not_run, {"done": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        handle = await engine.start(flow)
        handle.cancel(reason="changed my mind")
        result = await handle.result()
        history = await engine.history(result.run_id)
    assert ran == []
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.node) == ("abort", "first")
    # (Created by an engine that drives it, the run is stored started.)
    assert kinds(history) == ["run_started", "run_finished"]


@node(outputs=["done"], timeout="PT1S")
async def finishes_at_deadline(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["finished"] = True
    return "done"


async def test_race_node_finishing_exactly_at_its_deadline_is_a_timeout_every_time() -> None:
    flow = (
        FlowBuilder("urn:test:flow:exact")
        .task("n", finishes_at_deadline, {"done": "end", "timeout": "late"})
        .terminal("end")
        .terminal("late", outcome="late")
        .build()
    )
    async with running() as (engine, _clock):
        results = [await engine.run(flow) for _ in range(50)]
    assert {(r.outcome, r.state.get("finished")) for r in results} == {("late", None)}


@node(outputs=["done"], timeout="PT5S")
async def not_yet(ctx: NodeContext) -> str:
    return "done"


async def test_sibling_scopes_are_independent() -> None:
    from flowtide.engine import CancelReason
    from flowtide.engine.timing.scope import CancelScope

    run_scope = CancelScope()
    a, b = run_scope.child("a"), run_scope.child("b")
    a.cancel(CancelReason.NODE_TIMEOUT, at(1))
    assert a.cancel_called and not b.cancel_called and not run_scope.cancel_called
    run_scope.cancel(CancelReason.ABORT, at(2))
    assert b.cancellation is not None and b.cancellation.reason is CancelReason.ABORT
    assert a.cancellation is not None and a.cancellation.reason is CancelReason.NODE_TIMEOUT


timed_attempts: list[tuple[int, str]] = []


@node(outputs=["done"], timeout="PT10S")
async def slow_then_fast(ctx: NodeContext) -> str:
    timed_attempts.append((ctx.attempt, ctx.now().isoformat()))
    if ctx.attempt == 1:
        await ctx.clock.sleep(timedelta(minutes=5))
    await ctx.clock.sleep(timedelta(seconds=8))
    return "done"


async def test_a_retried_timeout_gets_a_fresh_window_per_attempt() -> None:
    flow = (
        FlowBuilder("urn:test:flow:retry-timeout")
        .task(
            "n",
            slow_then_fast,
            {"done": "end"},
            retry={"backoff": "fixed", "initial": "PT5S", "retry_on": ["NodeTimeoutError"]},
        )
        .terminal("end")
        .build()
    )
    timed_attempts.clear()
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    # Attempt 1 times out at 10 s; attempt 2 starts at 15 s and has until 25 s: done at 23 s.
    assert timed_attempts == [(1, at(0).isoformat()), (2, at(15).isoformat())]
    started = of_kind(history, "node_started")
    assert [e.data["deadline"] for e in started] == [at(10).isoformat(), at(25).isoformat()]
    assert history[-1].at == at(23)


started_code: list[str] = []


@node(outputs=["done"], timeout="PT5S", timeout_anchor="instance")
async def instance_bound(ctx: NodeContext) -> str:
    started_code.append(ctx.placement)
    return "done"


async def test_a_window_already_over_on_arrival_times_out_without_running_the_code() -> None:
    started_code.clear()
    flow = (
        FlowBuilder("urn:test:flow:instance-anchor")
        .wait("first", "PT10S", then="bound")
        .task("bound", instance_bound, {"done": "end", "timeout": "late"})
        .terminal("end")
        .terminal("late", outcome="late")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.outcome == "late"
    assert started_code == []
    (timed_out,) = of_kind(history, "node_timed_out")
    assert (timed_out.at, timed_out.data["deadline"]) == (at(10), at(5).isoformat())


async def test_run_deadline_names_every_running_placement() -> None:
    observed.clear()
    flow = (
        FlowBuilder("urn:test:flow:two-long")
        .task("fork", fork, {"go": ["l1", "l2"]})
        .task("l1", long_budget, {"done": "j", "timeout": "j"})
        .task("l2", long_budget, {"done": "j", "timeout": "j"})
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, deadline="PT30S")
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None
    assert (result.interrupted_at.node, result.interrupted_at.nodes) == ("l1", ("l1", "l2"))
    assert observed == ["cancelled: run_deadline", "cancelled: run_deadline"]
