"""Phases and subflows."""

from __future__ import annotations

from datetime import timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext
from flowtide.model import Flow
from tests.engine.engine_helpers import at, of_kind, running

calls: list[str] = []


@node(outputs=["done"], execution="inline")
def setup(ctx: NodeContext) -> None:
    calls.append("setup")
    ctx.state["ready"] = True


@node(outputs=["done"], execution="inline")
def setup_two(ctx: NodeContext) -> None:
    calls.append("setup-two")
    ctx.state["order"] = [*ctx.state.get("order", []), "two"]


@node(outputs=["done"], execution="inline")
def broken_setup(ctx: NodeContext) -> None:
    calls.append("broken")
    raise RuntimeError("no database")


@node(outputs=["done"], execution="inline")
def work(ctx: NodeContext) -> None:
    calls.append(f"work ready={ctx.state.get('ready')}")


@node(outputs=["done"], execution="inline")
def explode(ctx: NodeContext) -> None:
    calls.append("explode")
    raise ValueError("boom")


@node(outputs=["done"], execution="inline")
def teardown(ctx: NodeContext) -> None:
    calls.append("teardown")
    ctx.state["torn"] = True


@node(outputs=["done"], execution="inline")
def broken_teardown(ctx: NodeContext) -> None:
    calls.append("broken-teardown")
    raise OSError("disk gone")


def phased(pre: list[object], main: object, post: list[object]) -> Flow:
    b = FlowBuilder("urn:test:flow:phases")
    for i, impl in enumerate(pre):
        b.phase(f"pre{i}", "pre", impl)  # type: ignore[arg-type]
    b.task("work", main, {"done": "end"})  # type: ignore[arg-type]
    for i, impl in enumerate(post):
        b.phase(f"post{i}", "post", impl)  # type: ignore[arg-type]
    b.terminal("end")
    return b.entrypoint("main", "work").build()


async def test_pre_phases_run_in_order_before_the_entrypoint_and_post_after() -> None:
    calls.clear()
    async with running() as (engine, _clock):
        result = await engine.run(phased([setup, setup_two], work, [teardown]))
    assert calls == ["setup", "setup-two", "work ready=True", "teardown"]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"ready": True, "order": ["two"], "torn": True}


async def test_failing_pre_phase_fails_the_run_before_any_other_node() -> None:
    calls.clear()
    async with running() as (engine, _clock):
        result = await engine.run(phased([broken_setup, setup], work, [teardown]))
    assert calls == ["broken", "teardown"]
    assert result.lifecycle is Lifecycle.FAILED
    (err,) = result.errors
    assert (err.type, err.placement) == ("RuntimeError", "pre0")
    assert "pre phase 'pre0' failed: RuntimeError: no database" in err.message


async def test_post_phase_runs_after_a_failure_and_its_own_failure_is_a_warning() -> None:
    calls.clear()
    async with running() as (engine, _clock):
        result = await engine.run(phased([], explode, [broken_teardown, teardown]))
        history = await engine.history(result.run_id)
    assert calls == ["explode", "broken-teardown", "teardown"]
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.type for e in result.errors] == ["ValueError"]
    assert result.warnings == ("post phase 'post0' failed: OSError: disk gone",)
    assert [e.data["message"] for e in of_kind(history, "warning")] == list(result.warnings)


async def test_failing_post_phase_changes_nothing_on_success() -> None:
    calls.clear()
    async with running() as (engine, _clock):
        result = await engine.run(phased([], work, [broken_teardown]))
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "completed"
    assert len(result.warnings) == 1


# -- subflows ------------------------------------------------------------------------------------


@node(outputs=["ok", "bad"], execution="inline")
def child_step(ctx: NodeContext) -> str:
    ctx.state["doubled"] = ctx.state["n"] * 2
    return "bad" if ctx.state["n"] < 0 else "ok"


@node(outputs=["done"], execution="inline")
def parent_done(ctx: NodeContext) -> None:
    ctx.state["after_child"] = True


@node(outputs=["done"], timeout="PT5S")
async def child_sleeps(ctx: NodeContext) -> None:
    await ctx.clock.sleep(timedelta(minutes=1))


CHILD = (
    FlowBuilder("urn:test:flow:child")
    .task("step", child_step, {"ok": "end", "bad": "fail"})
    .terminal("end")
    .terminal("fail", outcome="failed")
    .build()
)
SLOW_CHILD = (
    FlowBuilder("urn:test:flow:slow-child")
    .task("sleep", child_sleeps, {"done": "end"})
    .terminal("end")
    .build()
)


def parent(child: Flow, *, route_error: bool) -> Flow:
    routes = {"success": "after"}
    if route_error:
        routes["error"] = "handled"
    b = (
        FlowBuilder("urn:test:flow:parent")
        .subflow(
            "call", child, routes, input={"n": "order.count"}, output={"result.doubled": "doubled"}
        )
        .task("after", parent_done, {"done": "end"})
        .terminal("end")
    )
    if route_error:
        b.terminal("handled", outcome="handled")
    return b.build()


async def test_subflow_maps_input_and_output() -> None:
    async with running(flows=[CHILD]) as (engine, _clock):
        result = await engine.run(parent(CHILD, route_error=True), {"order": {"count": 4}})
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"order": {"count": 4}, "result": {"doubled": 8}, "after_child": True}
    (fin,) = of_kind(history, "subflow_finished")
    assert fin.data["output"] == "success"


async def test_child_failure_routes_the_parents_error() -> None:
    async with running(flows=[CHILD]) as (engine, _clock):
        result = await engine.run(parent(CHILD, route_error=True), {"order": {"count": -1}})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "handled"


async def test_child_failure_fails_the_parent_when_error_is_not_routed() -> None:
    async with running(flows=[CHILD]) as (engine, _clock):
        result = await engine.run(parent(CHILD, route_error=False), {"order": {"count": -1}})
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.type for e in result.errors] == ["FailedTerminalError", "SubflowFailedError"]
    assert "ended failed" in result.errors[1].message


async def test_child_timeout_routes_the_parents_error() -> None:
    async with running(flows=[SLOW_CHILD]) as (engine, _clock):
        result = await engine.run(parent(SLOW_CHILD, route_error=True), {"order": {"count": 1}})
        assert result.outcome == "handled"
        failed = await engine.run(parent(SLOW_CHILD, route_error=False), {"order": {"count": 1}})
    assert failed.lifecycle is Lifecycle.FAILED
    assert [e.type for e in failed.errors] == ["NodeTimeoutError", "SubflowFailedError"]


@node(outputs=["deeper", "stop"], execution="inline")
def count_level(ctx: NodeContext) -> str:
    ctx.state["level"] = ctx.state.get("level", 0) + 1
    return "deeper"


RECURSIVE = (
    FlowBuilder("urn:test:flow:recursive")
    .task("count", count_level, {"deeper": "again", "stop": "end"})
    .subflow("again", "urn:test:flow:recursive", {"success": "end"})
    .terminal("end")
)


async def test_unknown_child_flow_is_a_clear_error() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(parent(CHILD, route_error=False), {"order": {"count": 1}})
    assert result.lifecycle is Lifecycle.FAILED
    assert result.errors[0].type == "UnknownFlowError"
    assert "urn:test:flow:child" in result.errors[0].message


async def test_recursion_is_stopped_by_the_depth_limit_with_a_clear_error() -> None:
    flow = RECURSIVE.build().model_copy(update={"max_depth": 3})
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.FAILED
    assert result.errors[0].type == "RecursionDepthError"
    assert result.errors[0].message == (
        "subflow 'urn:test:flow:recursive' at placement 'again' would nest deeper than the "
        "limit of 3 levels (flow.max_depth)"
    )
    assert [e.type for e in result.errors[1:]] == ["SubflowFailedError"] * 3


async def test_a_depth_limit_hit_takes_the_error_route_like_any_child_failure() -> None:
    # The deepest subflow's child cannot start: its placement routes error to a terminal of
    # its own; every level above then completes.
    flow = (
        FlowBuilder("urn:test:flow:recursive-routed")
        .task("count", count_level, {"deeper": "again", "stop": "end"})
        .subflow("again", "urn:test:flow:recursive-routed", {"success": "end", "error": "deep"})
        .terminal("end")
        .terminal("deep", "too-deep")
        .build()
        .model_copy(update={"max_depth": 3})
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "completed"  # the top level's own end
    children = [e.data["child"] for e in history if e.kind == "subflow_started"]
    assert len(children) == 1
    deepest = children[0]
    for _ in range(2):
        child_history = await engine.history(deepest)
        nested = [e.data["child"] for e in child_history if e.kind == "subflow_started"]
        if not nested:
            break
        deepest = nested[0]
    deepest_history = await engine.history(deepest)
    (failed,) = [e for e in deepest_history if e.kind == "node_failed"]
    assert failed.data["error"]["type"] == "RecursionDepthError"
    assert failed.data["to"] == ["deep"]
    deepest_result = await engine.wait(deepest)
    assert deepest_result.outcome == "too-deep"


async def test_subflow_timeout_setting_bounds_the_child() -> None:
    flow = (
        FlowBuilder("urn:test:flow:bounded-parent")
        .subflow("call", SLOW_CHILD, {"success": "end", "timeout": "late"}, timeout="PT2S")
        .terminal("end")
        .terminal("late", outcome="late")
        .build()
    )
    async with running(flows=[SLOW_CHILD]) as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.outcome == "late"
    (timed_out,) = of_kind(history, "node_timed_out")
    assert timed_out.at == at(2)
