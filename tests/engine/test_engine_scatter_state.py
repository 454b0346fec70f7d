"""Scatter items and the run state: each item works on the state as the scatter started, its
own; what one item changes in a value it read is seen by no other item, nor by the run, nor in
the gathered results of the others."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext
from flowtide.model import Flow
from tests.engine.engine_helpers import running

START: dict[str, Any] = {"cfg": {"seen": [], "limits": {"n": [1]}}, "numbers": [3, 1, 2]}


@node(outputs=["done"])
async def mutate(ctx: NodeContext) -> None:
    """Changes, in place, a nested value it read; notes what it saw of it."""
    seen = ctx.state["cfg"]["seen"]
    await ctx.clock.sleep(timedelta(seconds=ctx.item))  # (items interleave)
    seen.append(ctx.item)
    ctx.state["saw"] = list(seen)


@node(outputs=["done"])
async def untouched(ctx: NodeContext) -> None:
    """Reads nothing of the state."""


@node(outputs=["done"])
async def after(ctx: NodeContext) -> None:
    """Changes the first gathered result in place; notes the second."""
    results = ctx.state["results"]
    results[0]["cfg"]["seen"].append("first")
    ctx.state["second"] = results[1]["cfg"]["seen"]


@node(outputs=["done"])
async def mutate_mapped(ctx: NodeContext) -> None:
    ctx.state["settings"]["limits"]["n"].append(ctx.item)
    ctx.state["saw"] = ctx.state["settings"]["limits"]["n"]


def flow(body: Any, **options: Any) -> Flow:
    return (
        FlowBuilder("urn:test:flow:scatter-state")
        .scatter("each", "numbers", body, {"all-success": "after"}, **options)
        .task("after", after, {"done": "end"})
        .terminal("end")
        .build()
    )


CHILD = (
    FlowBuilder("urn:test:flow:scatter-state-child")
    .task("m", mutate, {"done": "end"})
    .terminal("end")
    .build()
)


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.parametrize("body", [mutate, CHILD], ids=["node", "flow"])
async def test_an_item_changing_a_value_it_read_changes_it_for_itself_only(
    concurrency: int, body: Any
) -> None:
    async with running(flows=[CHILD]) as (engine, _clock):
        result = await engine.run(flow(body, concurrency=concurrency), START)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["cfg"] == {"seen": [], "limits": {"n": [1]}}  # (the run's: as it was)
    results = result.state["results"]
    assert [r["saw"] for r in results] == [[3], [1], [2]]  # (no item saw another's)
    # (A later node changing one gathered result changes no other.)
    assert results[0]["cfg"]["seen"] == [3, "first"]
    assert result.state["second"] == [1]
    assert START["cfg"] == {"seen": [], "limits": {"n": [1]}}  # (nor the input given)


async def test_results_of_items_that_read_nothing_share_nothing() -> None:
    by_field = (
        FlowBuilder("urn:test:flow:scatter-state-field")
        .scatter(
            "each",
            "numbers",
            untouched,
            {"all-success": "end"},
            gather={"strategy": "append", "field": "cfg"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        whole = await engine.run(flow(untouched), START)
        field = await engine.run(by_field, START)
    cfg = START["cfg"]
    assert whole.state["results"][1:] == [{"cfg": cfg, "item": 1}, {"cfg": cfg, "item": 2}]
    assert whole.state["results"][0] == {"cfg": {**cfg, "seen": ["first"]}, "item": 3}
    assert whole.state["second"] == []  # (the first result changed alone)
    assert whole.state["cfg"] == cfg
    first, second, third = field.state["results"]
    assert first == second == third == cfg == field.state["cfg"]
    assert first is not second and second is not third
    assert all(r is not field.state["cfg"] for r in (first, second, third))


async def test_an_item_changing_a_mapped_input_leaves_the_run_state_as_it_was() -> None:
    placements = (
        FlowBuilder("urn:test:flow:scatter-state-input")
        .scatter(
            "each",
            "numbers",
            mutate_mapped,
            {"all-success": "end"},
            input={"settings.limits": "cfg.limits"},
            concurrency=3,
            gather={"strategy": "append", "field": "saw"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(placements, START)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [[1, 3], [1, 1], [1, 2]]
    assert result.state["cfg"] == START["cfg"]


@node(outputs=["done"])
async def mark_item(ctx: NodeContext) -> None:
    """Changes its item in place, through ``ctx.item``; notes what it saw of it."""
    await ctx.clock.sleep(timedelta(seconds=ctx.item["n"]))  # (items interleave)
    ctx.item["marked"] = True
    ctx.state["saw"] = dict(ctx.item)


@pytest.mark.parametrize("batch", [None, {"key": "k", "size": 2}], ids=["items", "batches"])
async def test_an_item_changing_ctx_item_leaves_the_run_state_as_it_was(
    batch: dict[str, Any] | None,
) -> None:
    """``ctx.item`` is the item's own, like the state the item reads: the run's collection
    (in memory and in the store) and the other items never see a change made to it."""

    @node(outputs=["done"])
    async def mark_batch(ctx: NodeContext) -> None:
        for each in ctx.item:
            each["marked"] = True

    body = mark_item if batch is None else mark_batch
    items = {"numbers": [{"n": 2, "k": 1}, {"n": 1, "k": 1}, {"n": 3, "k": 1}]}
    options: dict[str, Any] = {"concurrency": 3}
    if batch is not None:
        options["batch"] = batch
    marking = (
        FlowBuilder("urn:test:flow:scatter-item-copy")
        .scatter("each", "numbers", body, {"all-success": "end"}, **options)
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(marking, items)
        stored = await engine.store.get_state(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["numbers"] == items["numbers"]
    assert stored["numbers"] == result.state["numbers"]
    if batch is None:
        assert [r["saw"] for r in result.state["results"]] == [
            {"n": 2, "k": 1, "marked": True},
            {"n": 1, "k": 1, "marked": True},
            {"n": 3, "k": 1, "marked": True},
        ]
