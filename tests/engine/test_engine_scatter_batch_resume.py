"""Keyed batches released by idle time resume after a crash with every item in exactly one
finished batch, whatever the pace of the source before and after the crash (on every store): a
batch that finished is skipped, one that had started is gathered again from the same items, and
only the other items are batched anew."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, SourceContext
from flowtide.model import Flow
from tests.engine.engine_helpers import at, fresh_store

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

PACE: list[float] = []
"""Seconds the source waits before each item (the pace of the current worker's source)."""
RAN: list[list[int]] = []
"""The items of each batch whose body ran to its end."""
STARTED: list[list[int]] = []
CRASH: list[bool] = [False]


async def paced(ctx: SourceContext) -> AsyncIterator[dict[str, Any]]:
    """Eight rows of one key, at the pace :data:`PACE` says."""
    for n in range(8):
        if PACE[n]:
            await ctx.clock.sleep(timedelta(seconds=PACE[n]))
        yield {"k": "a", "n": n}


@node(outputs=["done"], register=False)
async def ship(ctx: NodeContext) -> None:
    batch = [row["n"] for row in ctx.item]
    STARTED.append(batch)
    if CRASH[0] and 4 in batch:
        await ctx.clock.sleep(timedelta(days=365))  # the worker "crashes" meanwhile
    await ctx.clock.sleep(timedelta(seconds=1))
    RAN.append(batch)
    ctx.state["shipped"] = batch


def flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:idle-batches-resume")
        .scatter(
            "ship",
            paced,
            ship,
            {"all-success": "end"},
            batch={"key": "k", "size": 10, "idle": "PT5S"},
            gather={"strategy": "append", "field": "shipped"},
        )
        .terminal("end")
        .build()
    )


async def test_idle_batches_resume_with_every_item_in_one_finished_batch() -> None:
    RAN.clear()
    STARTED.clear()
    # Before the crash: pairs 11 s apart, each released by its idle time (5 s).
    PACE[:] = [0, 1, 10, 1, 10, 1, 10, 1]
    CRASH[0] = True
    store = fresh_store()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock, flows=[flow()])
    try:
        handle = await first.start(flow())
        await clock.advance(timedelta(seconds=35))
        assert RAN == [[0, 1], [2, 3]] and STARTED[-1] == [4, 5]  # [6] pulled, not released
        await first.close()  # the crash: nothing more is recorded by this engine
        # After it: the whole source at once, so no idle time groups anything as before.
        PACE[:] = [0] * 8
        CRASH[0] = False
        second = Engine(store=store, clock=clock, flows=[flow()])
        resumed = await second.resume(handle.run_id)
        await clock.advance(timedelta(seconds=60))
        result = await resumed.result()
        await second.close()
    finally:
        await first.close()
        await store.close()
        await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED
    # The batch that had started runs again on the same items; the others are new.
    assert RAN == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert result.state["results"] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def child() -> Flow:
    return (
        FlowBuilder("urn:test:flow:ship-one-batch")
        .task("ship", ship, {"done": "end"})
        .terminal("end")
        .build()
    )


def flow_body() -> Flow:
    """The same scatter with a flow for its body: each batch is a child run."""
    return (
        FlowBuilder("urn:test:flow:idle-batches-resume-children")
        .scatter(
            "ship",
            paced,
            child(),
            {"all-success": "end"},
            batch={"key": "k", "size": 10, "idle": "PT5S"},
            gather={"strategy": "append", "field": "shipped"},
        )
        .terminal("end")
        .build()
    )


async def test_a_batch_with_a_flow_body_finds_its_child_again_on_the_same_items() -> None:
    RAN.clear()
    STARTED.clear()
    PACE[:] = [0, 1, 10, 1, 10, 1, 10, 1]
    CRASH[0] = True
    store = fresh_store()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock, flows=[flow_body(), child()])
    try:
        handle = await first.start(flow_body())
        await clock.advance(timedelta(seconds=35))
        assert RAN == [[0, 1], [2, 3]] and STARTED[-1] == [4, 5]
        await first.close()
        PACE[:] = [0] * 8
        CRASH[0] = False
        second = Engine(store=store, clock=clock, flows=[flow_body(), child()])
        resumed = await second.resume(handle.run_id)
        await clock.advance(timedelta(seconds=60))
        result = await resumed.result()
        children = [r for r in await store.list_runs() if r.parent_run_id == handle.run_id]
        await second.close()
    finally:
        await first.close()
        await store.close()
        await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert RAN == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert result.state["results"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert len(children) == 4  # (the child of [4, 5] was found again, not started twice)
