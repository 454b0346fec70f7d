"""Every run yields to the event loop between its steps: a node that routes back to itself
without awaiting anything does not starve the run's own deadline, other runs or the sweeper."""

from __future__ import annotations

import asyncio

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, Lifecycle, NodeContext
from flowtide.model import Flow


@node(outputs=["again", "stop"])
async def spin(ctx: NodeContext) -> str:
    return "again"  # never awaits, never stops


@node(outputs=["done"])
async def quick(ctx: NodeContext) -> str:
    await asyncio.sleep(0)
    return "done"


def hot_loop() -> Flow:
    return (
        FlowBuilder("urn:test:flow:hot-loop")
        .task("spin", spin, {"again": "spin", "stop": "end"})
        .terminal("end", "completed")
        .deadline("PT0.3S")
        .build()
    )


def other() -> Flow:
    return (
        FlowBuilder("urn:test:flow:other")
        .task("quick", quick, {"done": "end"})
        .terminal("end", "completed")
        .build()
    )


async def test_a_hot_self_loop_ends_at_its_deadline_and_other_runs_go_on() -> None:
    # The system clock: the loop never waits, so a virtual clock would never move.
    async with Engine() as engine:
        looping = await engine.start(hot_loop())
        others = [await engine.run(other()) for _ in range(20)]
        result = await asyncio.wait_for(looping.result(), timeout=30)
    assert all(r.lifecycle is Lifecycle.COMPLETED for r in others)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None and result.interrupted_at.reason == "timeout"
