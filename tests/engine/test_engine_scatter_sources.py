"""Scatter source functions: items that are not in the run's state, from a registered function
(``@flowtide.source``) called with a read-only view of it; what it may return, its errors, and
resuming a scatter it feeds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node, source
from flowtide.clock import VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import Engine, Lifecycle, NodeContext, SourceContext
from flowtide.errors import NodeResolutionError
from flowtide.model import Flow
from flowtide.store import Commit, MemoryStore
from tests.engine.engine_helpers import at, of_kind, raw_flow, running

HERE = "tests.engine.test_engine_scatter_sources"

calls: list[dict[str, Any]] = []
"""What each call of a source function here saw."""
pulled: list[int] = []
"""The items :func:`numbers` gave, in order, over all its calls."""
executed: list[int] = []
"""The items :func:`tenfold` ran on, in order."""


@source
def numbers(ctx: SourceContext) -> Iterator[int]:
    """0 to the state's ``n`` (excluded), lazily."""
    calls.append(
        {
            "run": ctx.run_id,
            "placement": ctx.placement,
            "visit": ctx.visit,
            "state": dict(ctx.state),
        }
    )
    for i in range(ctx.state["n"]):
        pulled.append(i)
        yield i


@node(outputs=["done"])
async def tenfold(ctx: NodeContext) -> None:
    executed.append(ctx.item)
    if ctx.item == 3 and ctx.state.get("crash"):
        await ctx.clock.sleep(timedelta(days=365))  # the engine "crashes" meanwhile
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["out"] = ctx.item * 10


@node(outputs=["done"], execution="inline")
def keep(ctx: NodeContext) -> None:
    ctx.state["out"] = {"item": ctx.item, "keys": sorted(ctx.state), "at": ctx.now().isoformat()}


def scatter_of(source_fn: str, body: Any = keep, **options: Any) -> Flow:
    routes = {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"}
    return (
        FlowBuilder(f"urn:test:flow:source:{source_fn.rpartition(':')[2]}")
        .scatter(
            "each",
            None,
            body,
            routes,
            source_fn=source_fn,
            gather={"strategy": "append", "field": "out"},
            **options,
        )
        .terminal("end")
        .build()
    )


# -- what the function sees and returns -----------------------------------------------------------


@source
def lines_of_the_order(ctx: SourceContext) -> list[int]:
    try:
        ctx.state["order"] = None  # type: ignore[index]
    except TypeError:
        calls.append({"read_only": True})
    lines: list[int] = ctx.state["order"]["lines"]
    lines.append(99)  # a copy: the run's state keeps its own list
    return lines


async def test_the_function_sees_a_read_only_copy_of_the_state() -> None:
    calls.clear()
    async with running() as (engine, _clock):
        result = await engine.run(
            scatter_of(f"{HERE}:lines_of_the_order"), {"order": {"lines": [1, 2]}, "n": 0}
        )
    assert result.lifecycle is Lifecycle.COMPLETED
    assert calls == [{"read_only": True}]
    assert [r["item"] for r in result.state["results"]] == [1, 2, 99]
    assert result.state["order"] == {"lines": [1, 2]}
    # Each item's state is the whole run state (no source collection is left out) with the item.
    assert result.state["results"][0]["keys"] == ["item", "n", "order"]


async def test_the_function_is_called_once_with_where_it_runs() -> None:
    calls.clear()
    pulled.clear()
    async with running() as (engine, _clock):
        result = await engine.run(scatter_of(f"{HERE}:numbers"), {"n": 3})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert [r["item"] for r in result.state["results"]] == [0, 1, 2]
    assert calls == [{"run": result.run_id, "placement": "each", "visit": 1, "state": {"n": 3}}]
    assert pulled == [0, 1, 2]


@source
async def fetched(ctx: SourceContext) -> list[dict[str, str]]:
    """An ``async def`` returning a list: awaited first, then its items are pulled."""
    await ctx.clock.sleep(timedelta(seconds=3))
    return [{"id": "a"}, {"id": "b"}]


async def test_an_awaitable_result_is_awaited_before_its_items_are_pulled() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(scatter_of(f"{HERE}:fetched", concurrency=2))
    assert result.lifecycle is Lifecycle.COMPLETED
    assert [(r["item"], r["at"]) for r in result.state["results"]] == [
        ({"id": "a"}, at(3).isoformat()),
        ({"id": "b"}, at(3).isoformat()),
    ]


@source
def nothing(ctx: SourceContext) -> Iterator[int]:
    yield from ()


async def test_a_function_that_gives_no_items_routes_empty() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(scatter_of(f"{HERE}:nothing"))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"results": []}
    assert of_kind(history, "node_finished")[0].data["output"] == "empty"


async def test_a_flow_document_names_its_source_function() -> None:
    text = f"""
id: urn:test:flow:source-from-yaml
entrypoints: {{main: each}}
placements:
  - id: each
    kind: scatter
    source_fn: {HERE}:numbers
    body: {{node: {HERE}:keep}}
    concurrency: 2
    gather: {{field: out.item}}
    routes: {{all-success: end, empty: end}}
  - {{id: end, kind: terminal}}
"""
    flow = load_flow(text, format="yaml")
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"n": 4})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [0, 1, 2, 3]


# -- its errors -----------------------------------------------------------------------------------


@source
def down(ctx: SourceContext) -> list[int]:
    raise RuntimeError("the orders service is down")


@source
def lost_cursor(ctx: SourceContext) -> Iterator[int]:
    yield 1
    raise RuntimeError("lost the cursor")


@source
def not_json(ctx: SourceContext) -> Iterator[Any]:
    yield {"tags": ["a"]}
    yield {"tags": {"a"}}


@source
def a_number(ctx: SourceContext) -> int:
    return 42


@source
async def broken_source(ctx: SourceContext) -> AsyncIterator[int]:
    yield 1
    await ctx.clock.sleep(timedelta(seconds=5))
    raise ConnectionError("the feed closed")


@pytest.mark.parametrize(
    ("function", "error", "message"),
    [
        ("down", "RuntimeError", "the orders service is down"),
        ("lost_cursor", "RuntimeError", "lost the cursor"),
        ("broken_source", "ConnectionError", "the feed closed"),
        (
            "not_json",
            "NotJSONError",
            f"item 1 of source function '{HERE}:not_json'/tags: a set is not JSON",
        ),
        (
            "a_number",
            "TypeError",
            f"source function '{HERE}:a_number' gave int, not an iterable or an async iterable",
        ),
    ],
)
async def test_a_failing_source_function_fails_the_run_at_the_scatter(
    function: str, error: str, message: str
) -> None:
    async with running() as (engine, _clock):
        result = await engine.run(scatter_of(f"{HERE}:{function}"))
    assert result.lifecycle is Lifecycle.FAILED
    (info,) = result.errors
    assert (info.type, info.placement) == (error, "each")
    assert message in info.message


def undecorated(ctx: SourceContext) -> list[int]:
    """A function of this module that is not registered as a source."""
    moved.append(ctx.run_id)
    return [1]


moved: list[str] = []
"""The runs an unregistered function was called for (none may be)."""


@pytest.mark.parametrize(
    "ref",
    [
        "tests.engine.nowhere:items",
        f"{HERE}:missing",
        f"{HERE}:pulled",
        f"{HERE}:undecorated",
        "builtins:exec",
        "os:system",
        "os:rename",
    ],
)
async def test_a_source_function_that_is_not_registered_refuses_the_run(ref: str) -> None:
    flow = raw_flow(
        [
            {
                "id": "each",
                "kind": "scatter",
                "source_fn": ref,
                "body": {"node": f"{HERE}:keep"},
                "routes": {"all-success": "end"},
            },
            {"id": "end", "kind": "terminal"},
        ]
    )
    store = MemoryStore()
    async with running(store=store) as (engine, _clock):
        with pytest.raises(NodeResolutionError) as caught:
            await engine.run(flow)
    message = str(caught.value)
    assert f"placement 'each' (/placements/0/source_fn): source function '{ref}'" in message
    assert "a --nodes module must register it (with @flowtide.source)" in message
    assert caught.value.refs == (ref,)
    assert await store.list_runs() == []  # nothing was stored, nothing ran
    assert moved == []


# -- resuming -------------------------------------------------------------------------------------

RESUMABLE = scatter_of(f"{HERE}:numbers", body=tenfold)


async def test_a_resumed_scatter_calls_its_function_again_and_skips_finished_items() -> None:
    calls.clear()
    pulled.clear()
    executed.clear()
    store = MemoryStore()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock, flows=[RESUMABLE])
    handle = await first.start(RESUMABLE, {"n": 6, "crash": True})
    await clock.advance(timedelta(seconds=10))
    assert executed == [0, 1, 2, 3]
    # Pulled only as slots freed: the item after the one still running is not pulled yet.
    assert pulled == [0, 1, 2, 3]
    await first.close()  # the crash: nothing more is recorded by this engine

    executed.clear()
    pulled.clear()
    await store.commit(Commit(handle.run_id, state={"crash": False}))
    second = Engine(store=store, clock=clock, flows=[RESUMABLE])
    resumed = await second.resume(handle.run_id)
    await clock.advance(timedelta(seconds=10))
    result = await resumed.result()
    await second.close()
    await clock.aclose()
    # Called again, with the state as it is now; the same items in the same order, of which
    # the three that finished are skipped by index.
    assert [c["state"] for c in calls] == [{"n": 6, "crash": True}, {"n": 6, "crash": False}]
    assert pulled == [0, 1, 2, 3, 4, 5]
    assert executed == [3, 4, 5]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [0, 10, 20, 30, 40, 50]


# -- stopping early -------------------------------------------------------------------------------

closed: list[int] = []
"""How many items :func:`endless` had given when it was closed."""
held: list[Iterator[int]] = []
"""The generators :func:`endless` made, kept alive (so only an explicit close can end them)."""


@source
def endless(ctx: SourceContext) -> Iterator[int]:
    def ones_then_negatives() -> Iterator[int]:
        given = 0
        try:
            while True:
                yield 1 if given < 2 else -1
                given += 1
        finally:
            closed.append(given)

    made = ones_then_negatives()
    held.append(made)
    return made


@node(outputs=["done"], execution="inline")
def positive(ctx: NodeContext) -> None:
    if ctx.item < 0:
        raise ValueError("negative")
    ctx.state["out"] = ctx.item


async def test_a_generator_the_scatter_stops_pulling_is_closed() -> None:
    closed.clear()
    held.clear()
    async with running() as (engine, _clock):
        result = await engine.run(scatter_of(f"{HERE}:endless", positive, on_failure="fail_fast"))
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [1, 1]
    # Items 0 and 1 succeeded, item 2 failed: nothing more was pulled, and the generator's
    # finally ran when the scatter ended (not when it was collected: it is still held here).
    assert closed == [2]
    held.clear()
