"""A due entry that an engine cannot fire (its run's flow is not registered there) is kept."""

from __future__ import annotations

from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.engine.engine import DEFER_UNFIREABLE
from flowtide.model import Flow
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import T0, at, of_kind


@node(outputs=["approved"], timeout="PT10S", register=False)
async def wait_for_ok(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


def approval() -> Flow:
    return (
        FlowBuilder("urn:test:flow:unfireable")
        .task("w", wait_for_ok, {"approved": "yes", "timeout": "late"})
        .terminal("yes", "approved")
        .terminal("late", "late")
        .build()
    )


async def test_a_deadline_is_deferred_not_dropped_by_an_engine_without_the_flow() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore()
    flow = approval()
    first = Engine(clock=clock, store=store, flows=[flow])
    run_id = (await first.run(flow)).run_id
    await first.close()  # the parked run stays in the store, its deadline at 10 s

    stranger = Engine(clock=clock, store=store)  # knows no flow
    stranger.sweeper  # noqa: B018 - start its sweeper
    await clock.settle()
    await clock.advance_to(at(10))
    await clock.settle()
    retry_at = at(10) + DEFER_UNFIREABLE
    assert [(e.when, e.purpose) for e in store.due_entries()] == [(retry_at, "timeout")]
    (warning,) = of_kind(await stranger.history(run_id), "warning")
    assert "cannot fire a due timeout here" in warning.data["message"]
    assert (await store.get_run(run_id)).lifecycle == Lifecycle.PARKED
    await stranger.close()

    owner = Engine(clock=clock, store=store, flows=[flow])
    owner.sweeper  # noqa: B018
    await clock.settle()
    await clock.advance_to(retry_at)
    await clock.settle()
    result = await owner.wait(run_id)
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "late")
    (timed_out,) = of_kind(await owner.history(run_id), "node_timed_out")
    assert timed_out.at == retry_at
    await owner.close()
