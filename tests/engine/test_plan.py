"""The plan answers reachability and loops on demand: long flows plan and run."""

from __future__ import annotations

import asyncio

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, Lifecycle, NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.model import Flow

CHAIN = 10_000


@node(outputs=["next"], register=False)
async def step(ctx: NodeContext) -> str:
    return "next"


@node(outputs=["paid", "declined"], register=False)
async def pay(ctx: NodeContext) -> str:
    return "paid"


@node(outputs=["retry", "give-up"], register=False)
async def offer(ctx: NodeContext) -> str:
    return "give-up"


@node(outputs=["again", "next"], register=False)
async def poll(ctx: NodeContext) -> str:
    return "next"


def plan_of(flow: Flow) -> FlowPlan:
    return Engine(flows=[flow]).plan(flow.id)


def test_a_chain_of_ten_thousand_tasks_plans_and_runs() -> None:
    b = FlowBuilder("urn:test:flow:long-chain")
    for i in range(CHAIN):
        b.task(f"n{i}", step, {"next": f"n{i + 1}" if i + 1 < CHAIN else "end"})
    flow = b.terminal("end").build()

    async def main() -> None:
        async with Engine(flows=[flow]) as engine:
            plan = engine.plan(flow.id)
            assert plan.can_reach("n0", "end")
            assert not plan.can_reach("end", "n0")
            assert not plan.in_loop(f"n{CHAIN // 2}")
            result = await engine.run(flow)
            assert result.lifecycle is Lifecycle.COMPLETED
            assert result.outcome == "completed"

    # Not an async test: the run's length on a busy machine is no reason to fail it.
    asyncio.run(main())


def test_the_plan_knows_each_placements_loop() -> None:
    flow = (
        FlowBuilder("urn:test:flow:payment-loop")
        .task("open", step, {"next": "collect"})
        .task("collect", pay, {"paid": "poll", "declined": "offer"})
        .task("offer", offer, {"retry": "collect", "give-up": "done"})
        .task("poll", poll, {"again": "poll", "next": "done"})  # a route to itself: a loop
        .terminal("done")
        .build()
    )
    plan = plan_of(flow)
    assert plan.same_loop("collect", "offer")
    assert plan.in_loop("collect") and plan.in_loop("offer") and plan.in_loop("poll")
    assert plan.same_loop("poll", "poll")
    assert not plan.same_loop("collect", "poll")
    assert not plan.in_loop("open") and not plan.in_loop("done")
    assert plan.loop_of("collect") == plan.loop_of("offer") != plan.loop_of("poll")
    assert plan.loop_of("open") is None
    assert plan.can_reach("collect", "collect") and not plan.can_reach("open", "open")
    assert "done" in plan.reach["collect"] and "open" not in plan.reach["collect"]
