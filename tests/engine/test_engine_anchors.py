"""Timeout anchors: park, instance and node, across loop re-entry and retries, and the
four ways a node anchor is released."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import at, of_kind, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["done"], register=False)
async def warmup(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=1))
    return "done"


ran: list[tuple[str, int]] = []


@node(outputs=["again", "ok", "out"], register=False)
async def parker(ctx: NodeContext) -> Any:
    ran.append((ctx.placement, ctx.visit))
    if ctx.signal is None:
        return Park(key=f"{ctx.run_id}:{ctx.visit}")
    return ctx.signal["go"]


@node(outputs=["back"], execution="inline", register=False)
def bounce(ctx: NodeContext) -> str:
    return "back"


@node(outputs=["done"], execution="inline", register=False)
def outside(ctx: NodeContext) -> str:
    return "done"


def loop_flow(anchor: str, **extra: Any) -> Flow:
    """warmup (1 min) -> p (parks; PT10M) -again-> b -> p; p -ok-> b too; p -out-> o -> end."""
    return (
        FlowBuilder(f"urn:test:flow:loop-{anchor}")
        .task("warmup", warmup, {"done": "p"})
        .task(
            "p",
            parker,
            {"again": "b", "ok": "b", "out": "o", "timeout": "b"},
            timeout="PT10M",
            timeout_anchor=anchor,
            **extra,
        )
        .task("b", bounce, {"back": "p"})
        .task("o", outside, {"done": "parked-outside"})
        .task("parked-outside", parker, {"again": "end", "ok": "end", "out": "end"})
        .terminal("end")
        .build()
    )


async def start(engine: Engine, clock: Any, flow: Flow) -> Any:
    """Start ``flow`` and let the warmup minute pass: the run is parked at p at 1:00."""
    handle = await engine.start(flow)
    await clock.advance_to(at(60))
    return await engine.wait_parked(handle.run_id)


async def parked_deadlines(engine: Engine, run_id: str, placement: str = "p") -> list[Any]:
    return [
        e.data["deadline"]
        for e in of_kind(await engine.history(run_id), "parked")
        if e.placement == placement
    ]


@pytest.mark.parametrize(
    ("anchor", "second"),
    [("park", at(14 * 60)), ("instance", at(10 * 60)), ("node", at(11 * 60))],
)
async def test_each_anchor_across_loop_re_entry(anchor: str, second: Any) -> None:
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, loop_flow(anchor))
        await clock.advance_to(at(4 * 60))
        await engine.signal(first.run_id, placement="p", output="again")
        await clock.settle()
        deadlines = await parked_deadlines(engine, first.run_id)
        explained = await engine.explain(first.run_id, placement="p")
    first_deadline = {"park": at(11 * 60), "instance": at(10 * 60), "node": at(11 * 60)}[anchor]
    assert deadlines == [first_deadline.isoformat(), second.isoformat()]
    assert explained.deadline == second
    assert explained.anchor.value == anchor
    assert explained.timeout_source == "placement" and explained.anchor_source == "placement"


attempts: dict[str, int] = {}


@node(outputs=["done"], register=False)
async def flaky_parker(ctx: NodeContext) -> Any:
    attempts[ctx.run_id] = ctx.attempt
    if ctx.attempt == 1:
        raise RuntimeError("gateway down")
    return Park()


@pytest.mark.parametrize(
    ("anchor", "first", "second"),
    [
        ("park", at(11 * 60), at(12 * 60)),
        ("instance", at(10 * 60), at(10 * 60)),
        ("node", at(11 * 60), at(11 * 60)),
    ],
)
async def test_each_anchor_across_retries(anchor: str, first: Any, second: Any) -> None:
    flow = (
        FlowBuilder(f"urn:test:flow:retry-{anchor}")
        .task("warmup", warmup, {"done": "p"})
        .task(
            "p",
            flaky_parker,
            {"done": "end", "timeout": "end"},
            timeout="PT10M",
            timeout_anchor=anchor,
            retry={"max_attempts": 2, "backoff": "fixed", "initial": "PT1M"},
        )
        .terminal("end")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(flow)
        await clock.advance_to(at(120))
        result = await engine.wait_parked(handle.run_id)
        history = await engine.history(result.run_id)
    started = [e.data["deadline"] for e in of_kind(history, "node_started") if e.placement == "p"]
    assert started == [first.isoformat(), second.isoformat()]
    (parked,) = of_kind(history, "parked")
    assert parked.at == at(120)
    assert parked.data["deadline"] == (second if anchor != "park" else at(12 * 60)).isoformat()


async def anchors(engine: Engine, run_id: str) -> list[tuple[str, Any]]:
    return [(a.placement, a.at) for a in await engine.store.node_anchors(run_id)]


async def test_release_on_an_output_listed_in_release_on() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, loop_flow("node", release_on=["ok"]))
        assert await anchors(engine, first.run_id) == [("p", at(60))]
        await clock.advance_to(at(3 * 60))
        await engine.signal(first.run_id, placement="p", output="again")  # not released
        await clock.settle()
        assert await anchors(engine, first.run_id) == [("p", at(60))]
        await clock.advance_to(at(5 * 60))
        await engine.signal(first.run_id, placement="p", output="ok")  # released, then re-entered
        await clock.settle()
        assert await anchors(engine, first.run_id) == [("p", at(5 * 60))]
        deadlines = await parked_deadlines(engine, first.run_id)
    assert deadlines[-1] == at(15 * 60).isoformat()


async def test_release_by_leaving_the_loop() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, loop_flow("node"))
        await clock.advance_to(at(2 * 60))
        await engine.signal(first.run_id, placement="p", output="out")
        await clock.settle()
        # o cannot reach p: the token left p's loop, the run goes on parked elsewhere.
        assert (await engine.store.get_run(first.run_id)).lifecycle == "parked"
        assert await anchors(engine, first.run_id) == []


@node(outputs=["done"], execution="inline", register=False)
def fork(ctx: NodeContext) -> str:
    return "done"


def pay_now_and_later() -> Flow:
    """fork -> [p (PT10M from the first arrival) <-again-> b, wait PT1H -> p]: the second
    branch pays again an hour later."""
    return (
        FlowBuilder("urn:test:flow:pay-again-later")
        .task("fork", fork, {"done": ["p", "later"]})
        .task(
            "p",
            parker,
            {"again": "b", "ok": "paid", "out": "paid", "timeout": "expired"},
            timeout="PT10M",
            timeout_anchor="node",
        )
        .task("b", bounce, {"back": "p"})
        .wait("later", "PT1H", then="p")
        .terminal("paid", "paid")
        .terminal("expired", "expired")
        .build()
    )


async def test_a_token_outside_the_loop_does_not_hold_the_anchor() -> None:
    # The first branch pays at 2 min and leaves p's loop: the anchor is released although the
    # waiting branch will come to p later. Its visit, an hour later, gets a window of its own.
    async with running(autojump=False) as (engine, clock):
        run = await engine.start(pay_now_and_later())
        await clock.settle()
        await clock.advance_to(at(2 * 60))
        await engine.signal(run.run_id, placement="p", output="ok")
        await clock.settle()
        assert await anchors(engine, run.run_id) == []
        await clock.advance_to(at(60 * 60))
        await clock.settle()
        assert await anchors(engine, run.run_id) == [("p", at(60 * 60))]
        deadlines = await parked_deadlines(engine, run.run_id)
        assert deadlines[-1] == at(70 * 60).isoformat()
        await engine.signal(run.run_id, placement="p", output="ok")
        result = await engine.wait(run.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED and result.terminals == ("paid", "paid")


async def test_a_parallel_token_inside_the_loop_holds_the_anchor() -> None:
    # Declined at 2 min: the token goes round the loop (b, back to p) and keeps the window of
    # the first arrival, while the waiting branch is still elsewhere.
    async with running(autojump=False) as (engine, clock):
        run = await engine.start(pay_now_and_later())
        await clock.settle()
        await clock.advance_to(at(2 * 60))
        await engine.signal(run.run_id, placement="p", output="again")
        await clock.settle()
        assert await anchors(engine, run.run_id) == [("p", at(0))]
        deadlines = await parked_deadlines(engine, run.run_id)
        assert deadlines[-1] == at(10 * 60).isoformat()


async def test_release_by_its_own_timeout_gives_a_fresh_window_on_re_entry() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, loop_flow("node"))
        await clock.advance_to(at(11 * 60))  # p times out at 11:00, routes to b, back to p
        await clock.settle()
        assert await anchors(engine, first.run_id) == [("p", at(11 * 60))]
        deadlines = await parked_deadlines(engine, first.run_id)
    assert deadlines == [at(11 * 60).isoformat(), at(21 * 60).isoformat()]


async def test_release_by_the_end_of_the_run() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, loop_flow("node"))
        assert await anchors(engine, first.run_id) == [("p", at(60))]
        await engine.cancel(first.run_id)
        result = await engine.wait(first.run_id)
        assert result.lifecycle is Lifecycle.CANCELLED
        assert await anchors(engine, first.run_id) == []


async def test_an_arrival_after_the_window_times_out_at_once_without_running_the_node() -> None:
    ran.clear()
    flow = (
        FlowBuilder("urn:test:flow:late-arrival")
        .task("warmup", warmup, {"done": "p"})
        .task(
            "p",
            parker,
            {"again": "w", "ok": "end", "out": "end", "timeout": "late"},
            timeout="PT10M",
            timeout_anchor="instance",
        )
        .wait("w", "PT15M", then="p")
        .terminal("end")
        .terminal("late", "late")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        first = await start(engine, clock, flow)
        await clock.advance_to(at(120))
        await engine.signal(first.run_id, placement="p", output="again")
        await clock.advance_to(at(17 * 60))
        result = await engine.wait(first.run_id)
        history = await engine.history(first.run_id)
    assert result.outcome == "late"
    (timed_out,) = of_kind(history, "node_timed_out")
    assert (timed_out.at, timed_out.data["deadline"]) == (at(17 * 60), at(600).isoformat())
    assert ran == [("p", 1)]  # the second arrival's code never started


@node(outputs=["done"], register=False)
async def six_minutes(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=6))
    return "done"


@node(outputs=["again", "stop"], execution="inline", register=False)
def once_more(ctx: NodeContext) -> str:
    ctx.state["rounds"] = ctx.state.get("rounds", 0) + 1
    ctx.state.setdefault("routes", [])
    return "again" if ctx.state["rounds"] < 2 else "stop"


async def test_a_node_anchor_inside_a_scatter_is_kept_per_item() -> None:
    flow = (
        FlowBuilder("urn:test:flow:scatter-anchor")
        .scatter(
            "each",
            "items",
            six_minutes,
            {"all-success": "count", "partial": "count", "all-error": "count", "empty": "count"},
            timeout="PT10M",
            timeout_anchor="node",
            gather={"strategy": "partition", "target": "by_output"},
        )
        .task("count", once_more, {"again": "each", "stop": "end"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        handle = await engine.start(flow, {"items": ["a", "b"]})
        mid: list[Any] = []

        def spy(event: Any) -> None:
            if event.kind == "node_finished" and event.placement == "each":
                mid.append(event.data["output"])

        engine.add_hook(spy)
        result = await handle.result()
        history = await engine.history(handle.run_id)
    # Round 1: a at 0-6, b at 6-12 (anchors 0 and 6). Round 2 starts at 12: a's window (0+10)
    # is over, it times out at once; b's (6+10) ends at 16, while it runs.
    assert mid == ["all-success", "all-error"]
    items = of_kind(history, "scatter_item_finished")
    assert [(e.at, e.data["output"]) for e in items] == [
        (at(360), "done"),
        (at(720), "done"),
        (at(720), "timeout"),
        (at(960), "timeout"),
    ]
    assert result.lifecycle is Lifecycle.COMPLETED
