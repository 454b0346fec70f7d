"""Scatter/gather: concurrency, backpressure, throttle, batches, gathers, failures, resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node, reducer, source
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, SourceContext
from flowtide.engine.run.scatter import progress_key
from flowtide.model import Flow
from tests.engine.engine_helpers import at, fresh_store, of_kind, running

active = 0
peak = 0
pulls: list[tuple[int, int]] = []
"""(item pulled, items running at that moment)"""


@node(outputs=["even", "odd"])
async def work(ctx: NodeContext) -> str:
    global active, peak
    active += 1
    peak = max(peak, active)
    try:
        await ctx.clock.sleep(timedelta(seconds=1 + ctx.item % 3))
    finally:
        active -= 1
    if ctx.item < 0:
        raise ValueError(f"negative {ctx.item}")
    ctx.state["square"] = ctx.item * ctx.item
    return "even" if ctx.item % 2 == 0 else "odd"


def scatter_flow(source: Any = "numbers", **options: Any) -> Flow:
    routes = {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"}
    return (
        FlowBuilder("urn:test:flow:scatter")
        .scatter("each", source, work, routes, **options)
        .terminal("end")
        .build()
    )


def counting_source(ctx: SourceContext) -> Iterator[int]:
    """The numbers up to the state's ``count``; each pull notes how many items ran then."""
    for i in range(ctx.state["count"]):
        pulls.append((i, active))
        yield i


async def run_scatter(numbers: Any, **options: Any) -> tuple[Any, Any]:
    async with running() as (engine, _clock):
        result = await engine.run(scatter_flow(**options), {"numbers": numbers})
        history = await engine.history(result.run_id)
    return result, history


async def test_concurrency_limit_is_never_exceeded_and_the_source_is_not_drained_ahead() -> None:
    global peak
    peak = 0
    pulls.clear()
    flow = scatter_flow(
        counting_source, concurrency=3, gather={"strategy": "append", "field": "square"}
    )
    # The builder keeps the function by the reference it is imported by.
    assert flow.to_data()["placements"][0]["source_fn"] == (
        "tests.engine.test_engine_scatter:counting_source"
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"count": 10})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert peak == 3
    assert [i for i, _ in pulls] == list(range(10))
    # An item is pulled only when a slot is free: never with 3 already running.
    assert max(running_then for _, running_then in pulls) <= 2
    assert result.state == {"count": 10, "results": [i * i for i in range(10)]}


async def test_throttle_spaces_item_starts_on_the_clock() -> None:
    result, history = await run_scatter([0, 1, 2, 3], concurrency=4, throttle=2.0)
    starts = [e.at for e in of_kind(history, "scatter_item_finished")]
    assert result.lifecycle is Lifecycle.COMPLETED
    # Starts at 0, 0.5, 1.0, 1.5 s; each takes 1 + item % 3 seconds.
    assert sorted(starts) == sorted([at(1), at(2.5), at(4), at(2.5)])


@reducer
def add(total: int, value: int) -> int:
    return total + value


@pytest.mark.parametrize(
    ("gather", "expected"),
    [
        ({"strategy": "append", "field": "square"}, [4, 1, 0]),
        ({"strategy": "collect", "field": "square"}, [0, 1, 4]),
        ({"strategy": "partition", "field": "square"}, {"even": [4, 0], "odd": [1]}),
        ({"strategy": "map", "field": "square", "key": "id"}, {"a": 4, "b": 1, "c": 0}),
        (
            {"strategy": "reduce", "field": "square", "reducer": f"{__name__}:add", "initial": 100},
            105,
        ),
    ],
)
async def test_each_gather_strategy(gather: dict[str, Any], expected: Any) -> None:
    items = [2, 1, 0]
    if gather["strategy"] == "map":
        flow = (
            FlowBuilder("urn:test:flow:scatter-map")
            .scatter(
                "each",
                "numbers",
                work_on_record,
                {"all-success": "end"},
                concurrency=3,
                gather=gather,
            )
            .terminal("end")
            .build()
        )
        async with running() as (engine, _clock):
            result = await engine.run(
                flow, {"numbers": [{"id": "a", "n": 2}, {"id": "b", "n": 1}, {"id": "c", "n": 0}]}
            )
    else:
        result, _ = await run_scatter(items, concurrency=3, gather=gather)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == expected


@node(outputs=["done"])
async def work_on_record(ctx: NodeContext) -> None:
    await ctx.clock.sleep(timedelta(seconds=3 - ctx.item["n"]))
    ctx.state["square"] = ctx.item["n"] ** 2


@pytest.mark.parametrize(
    ("numbers", "route"),
    [([], "empty"), ([1, 2], "all-success"), ([1, -1], "partial"), ([-1, -2], "all-error")],
)
async def test_routes(numbers: list[int], route: str) -> None:
    flow = (
        FlowBuilder("urn:test:flow:scatter-routes")
        .scatter(
            "each",
            "numbers",
            work,
            {"all-success": "ok", "partial": "some", "all-error": "none", "empty": "nothing"},
            concurrency=2,
        )
        .terminal("ok", outcome="all-success")
        .terminal("some", outcome="partial")
        .terminal("none", outcome="all-error")
        .terminal("nothing", outcome="empty")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"numbers": numbers})
    assert result.outcome == route


async def test_fail_fast_stops_starting_items() -> None:
    global peak
    peak = 0
    result, history = await run_scatter(
        [1, -1, 4, 5, 6],
        concurrency=1,
        on_failure="fail_fast",
        gather={"strategy": "partition", "field": "square"},
    )
    assert [e.data["index"] for e in of_kind(history, "scatter_item_finished")] == [0, 1]
    assert result.state["results"] == {
        "odd": [1],
        "error": [{"item": -1, "error": "ValueError: negative -1"}],
    }


@node(outputs=["done"], execution="inline")
def batch_body(ctx: NodeContext) -> None:
    ctx.state["batch"] = [x["v"] for x in ctx.item]


async def test_keyed_batches_by_size_and_at_source_end() -> None:
    def flow(strategy: str) -> Flow:
        gather = {"strategy": strategy, "field": "batch"}
        if strategy == "map":
            gather["key"] = "k"
        return (
            FlowBuilder(f"urn:test:flow:batches-{strategy}")
            .scatter(
                "each",
                "rows",
                batch_body,
                {"all-success": "end"},
                batch={"key": "k", "size": 2},
                gather=gather,
            )
            .terminal("end")
            .build()
        )

    rows = [
        {"k": "a", "v": 1},
        {"k": "b", "v": 2},
        {"k": "a", "v": 3},
        {"k": "b", "v": 4},
        {"k": "a", "v": 5},
    ]
    async with running() as (engine, _clock):
        appended = await engine.run(flow("append"), {"rows": rows})
        mapped = await engine.run(flow("map"), {"rows": rows})
    # "a" fills at its second item, "b" at its second, the last "a" goes out at the end.
    assert appended.state["results"] == [[1, 3], [2, 4], [5]]
    # A map keeps one result per key: the last batch of that key.
    assert mapped.state["results"] == {"a": [5], "b": [2, 4]}


async def rows_then_quiet(ctx: SourceContext) -> AsyncIterator[dict[str, Any]]:
    """Two rows of key "a", one of key "b", then nothing for a minute before the end."""
    for i, k in enumerate(["a", "a", "b"]):
        yield {"k": k, "v": i}
    await ctx.clock.sleep(timedelta(minutes=1))


async def test_keyed_batches_released_when_idle() -> None:
    seen: list[tuple[float, list[int]]] = []

    @node(id="test:batch:collect", outputs=["done"], execution="inline")
    def collect(ctx: NodeContext) -> None:
        seen.append(((ctx.now() - at(0)).total_seconds(), [x["v"] for x in ctx.item]))

    flow = (
        FlowBuilder("urn:test:flow:idle-batches")
        .scatter(
            "each",
            rows_then_quiet,
            collect,
            {"all-success": "end"},
            batch={"key": "k", "size": 10, "idle": "PT5S"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.COMPLETED
    # Neither batch is full: both go out when idle (5 s), not when the source ends (60 s).
    assert sorted(seen) == [(5.0, [0, 1]), (5.0, [2])]


@source
async def quiet_source(ctx: SourceContext) -> AsyncIterator[dict[str, Any]]:
    """Two rows of key "a" at once, then nothing for 10 s, then one row of key "b"."""
    yield {"k": "a", "v": 0}
    yield {"k": "a", "v": 1}
    await ctx.clock.sleep(timedelta(seconds=10))
    yield {"k": "b", "v": 2}


async def test_an_idle_batch_starts_at_its_idle_instant_while_the_source_is_still_quiet() -> None:
    started: list[tuple[float, list[int]]] = []

    @node(id="test:batch:record-start", outputs=["done"], execution="inline")
    def record_start(ctx: NodeContext) -> None:
        started.append(((ctx.now() - at(0)).total_seconds(), [x["v"] for x in ctx.item]))

    flow = (
        FlowBuilder("urn:test:flow:idle-batch-quiet-source")
        .scatter(
            "each",
            None,
            record_start,
            {"all-success": "end"},
            source_fn="tests.engine.test_engine_scatter:quiet_source",
            batch={"key": "k", "size": 10, "idle": "PT5S"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.COMPLETED
    # "a" is idle from 0 s: it starts at 5 s, not when the source yields "b" at 10 s; "b" goes
    # out when the source ends.
    assert started == [(5.0, [0, 1]), (10.0, [2])]


pulled: list[float] = []
"""When each row of :func:`timed_rows` was pulled (seconds from the start)."""


async def timed_rows(ctx: SourceContext) -> AsyncIterator[dict[str, Any]]:
    for i in range(4):
        pulled.append((ctx.now() - at(0)).total_seconds())
        yield {"k": i, "v": i}


async def test_batches_waiting_for_a_slot_hold_the_source_back() -> None:
    pulled.clear()

    @node(id="test:batch:slow", outputs=["done"])
    async def slow_batch(ctx: NodeContext) -> None:
        await ctx.clock.sleep(timedelta(seconds=2))

    flow = (
        FlowBuilder("urn:test:flow:batch-backpressure")
        .scatter(
            "each",
            timed_rows,
            slow_batch,
            {"all-success": "end"},
            concurrency=1,
            batch={"key": "k", "size": 1},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.COMPLETED
    # One batch runs, one released batch waits for its slot: only then is the source pulled.
    assert pulled == [0, 0, 2, 4]


# -- resume after a crash -------------------------------------------------------------------------

executed: list[int] = []
gate = asyncio.Event


@node(outputs=["done"])
async def resumable(ctx: NodeContext) -> None:
    executed.append(ctx.item)
    if ctx.item == 3 and ctx.state.get("crash"):
        await ctx.clock.sleep(timedelta(days=365))  # the engine "crashes" meanwhile
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["out"] = ctx.item * 10


RESUMABLE = (
    FlowBuilder("urn:test:flow:resumable")
    .scatter(
        "each",
        "items",
        resumable,
        {"all-success": "end"},
        gather={"strategy": "append", "field": "out"},
    )
    .terminal("end")
    .build()
)


@pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)
async def test_scatter_resumed_after_a_crash_reruns_only_unfinished_items() -> None:
    from flowtide.clock import VirtualClock

    executed.clear()
    store = fresh_store()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock, flows=[RESUMABLE])
    handle = await first.start(RESUMABLE, {"items": [0, 1, 2, 3, 4, 5], "crash": True})
    await clock.advance(timedelta(seconds=10))
    assert executed == [0, 1, 2, 3]
    await first.close()  # the crash: nothing more is recorded by this engine
    run = await store.get_run(handle.run_id)
    assert run.lifecycle == "running"
    token = (await store.tokens(handle.run_id))[0]
    # Scatter progress is kept per visit of the scatter placement.
    progress = progress_key(token.placement, token.visit)
    items = await store.scatter_items(handle.run_id, progress)
    assert [(i.index, i.progress) for i in items] == [(0, progress), (1, progress), (2, progress)]

    executed.clear()
    await store.commit(
        __import__("flowtide.store", fromlist=["Commit"]).Commit(
            handle.run_id, state={"crash": False}
        )
    )
    second = Engine(store=store, clock=clock, flows=[RESUMABLE])
    resumed = await second.resume(handle.run_id)
    await clock.advance(timedelta(seconds=10))
    result = await resumed.result()
    await second.close()
    await store.close()
    assert executed == [3, 4, 5]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [0, 10, 20, 30, 40, 50]


# -- scatters one after the other ----------------------------------------------------------------

ran: list[tuple[str, int]] = []
"""(placement, item) of each body that ran."""


@node(outputs=["done"])
async def doubles(ctx: NodeContext) -> None:
    ran.append((ctx.placement, ctx.item))
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["out"] = ctx.item * 2


@node(outputs=["done"])
async def squares(ctx: NodeContext) -> None:
    ran.append((ctx.placement, ctx.item))
    if ctx.item == 3 and ctx.state.get("crash"):
        await ctx.clock.sleep(timedelta(days=365))  # the engine "crashes" meanwhile
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["out"] = ctx.item**2


TWO_SCATTERS = (
    FlowBuilder("urn:test:flow:two-scatters")
    .scatter(
        "double",
        "items",
        doubles,
        {"all-success": "square"},
        gather={"strategy": "append", "field": "out", "target": "doubled"},
    )
    .scatter(
        "square",
        "items",
        squares,
        {"all-success": "end"},
        gather={"strategy": "append", "field": "out", "target": "squared"},
    )
    .terminal("end")
    .build()
)


async def test_two_scatters_in_a_row_each_run_their_body_and_gather_their_own_results() -> None:
    ran.clear()
    async with running() as (engine, _clock):
        result = await engine.run(TWO_SCATTERS, {"items": [1, 2, 3]})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["doubled"] == [2, 4, 6]
    assert result.state["squared"] == [1, 4, 9]
    assert sorted(ran) == [("double", i) for i in (1, 2, 3)] + [("square", i) for i in (1, 2, 3)]


@pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)
async def test_a_run_resumed_in_its_second_scatter_reruns_only_its_unfinished_items() -> None:
    from flowtide.clock import VirtualClock
    from flowtide.store import Commit

    ran.clear()
    store = fresh_store()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock, flows=[TWO_SCATTERS])
    handle = await first.start(TWO_SCATTERS, {"items": [0, 1, 2, 3, 4, 5], "crash": True})
    await clock.advance(timedelta(seconds=20))
    assert [i for p, i in ran if p == "square"] == [0, 1, 2, 3]
    await first.close()  # the crash: nothing more is recorded by this engine

    ran.clear()
    await store.commit(Commit(handle.run_id, state={"crash": False}))
    second = Engine(store=store, clock=clock, flows=[TWO_SCATTERS])
    resumed = await second.resume(handle.run_id)
    await clock.advance(timedelta(seconds=20))
    result = await resumed.result()
    await second.close()
    await store.close()
    assert ran == [("square", 3), ("square", 4), ("square", 5)]
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["doubled"] == [0, 2, 4, 6, 8, 10]
    assert result.state["squared"] == [0, 1, 4, 9, 16, 25]


@node(outputs=["done"], timeout="PT2S")
async def maybe_slow(ctx: NodeContext) -> None:
    await ctx.clock.sleep(timedelta(seconds=ctx.item))
    ctx.state["v"] = ctx.item


async def test_item_timeout_fails_only_that_item() -> None:
    flow = (
        FlowBuilder("urn:test:flow:scatter-timeout")
        .scatter(
            "each",
            "items",
            maybe_slow,
            {"partial": "end"},
            concurrency=3,
            gather={"strategy": "partition", "field": "v"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"items": [1, 5, 0]})
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"]["done"] == [1, 0]
    assert [r["item"] for r in result.state["results"]["timeout"]] == [5]


@node(outputs=["done"])
async def parks(ctx: NodeContext) -> Any:
    return Park(key=f"item-{ctx.item}")


async def test_a_node_body_that_parks_fails_its_item_saying_so() -> None:
    flow = (
        FlowBuilder("urn:test:flow:scatter-park")
        .scatter(
            "each",
            "items",
            parks,
            {"all-error": "end"},
            gather={"strategy": "partition", "field": "v"},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"items": [1]})
    assert result.lifecycle is Lifecycle.COMPLETED
    (failed,) = result.state["results"]["error"]
    assert failed["error"].endswith("at 'each' parked where it cannot")


CHILD = (
    FlowBuilder("urn:test:flow:item-child")
    .task("w", work, {"even": "end", "odd": "end"})
    .terminal("end")
    .build()
)


async def test_flow_body_per_item() -> None:
    flow = (
        FlowBuilder("urn:test:flow:scatter-flow-body")
        .scatter(
            "each",
            "numbers",
            CHILD,
            {"all-success": "end", "partial": "end"},
            concurrency=2,
            gather={"strategy": "append", "field": "square"},
        )
        .terminal("end")
        .build()
    )
    async with running(flows=[CHILD]) as (engine, _clock):
        result = await engine.run(flow, {"numbers": [3, -1, 2]})
        history = await engine.history(result.run_id)
    assert result.state["results"] == [9, 4]
    finished = of_kind(history, "scatter_item_finished")
    assert [(e.data["index"], e.data["output"], e.at) for e in finished] == [
        (0, "success", at(1)),
        (1, "error", at(3)),
        (2, "success", at(4)),
    ]


WAITING = (
    FlowBuilder("urn:test:flow:resume-wait").wait("nap", "PT1H", then="end").terminal("end").build()
)


@pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)
async def test_a_waiting_run_is_resumed_by_another_engine_and_fires_on_time() -> None:
    from flowtide.clock import VirtualClock

    store = fresh_store()
    clock = VirtualClock(at(0))
    first = Engine(store=store, clock=clock)
    handle = await first.start(WAITING)
    await clock.advance(timedelta(minutes=10))
    await first.close()
    second = Engine(store=store, clock=clock, flows=[WAITING])
    resumed = await second.resume(handle.run_id)
    await clock.advance(timedelta(minutes=49))
    assert not resumed.done
    await clock.advance(timedelta(minutes=1))
    result = await resumed.result()
    history = await second.history(handle.run_id)
    await second.close()
    await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert [e.at for e in of_kind(history, "timer_fired")] == [at(3600)]


all_started: list[asyncio.Event] = []  # (made by the test, in its own loop)
started_items: set[int] = set()


@node(outputs=["done"])
async def square_at_once(ctx: NodeContext) -> str:
    """Ends once all 20 items have started: the items end together."""
    started_items.add(ctx.item)
    if len(started_items) == 20:
        all_started[0].set()
    await all_started[0].wait()
    ctx.state["square"] = ctx.item * ctx.item
    return "done"


async def test_items_that_finish_together_are_stored_together_each_once() -> None:
    """Items that finish while one item's commit is on its way are stored by the next commit,
    together: fewer commits than items, each item stored once, with its event, in order."""
    store = fresh_store()
    stored_per_commit: list[int] = []
    commit = store.commit

    async def counted(c: Any, *args: Any, **kwargs: Any) -> Any:
        if c.scatter:
            stored_per_commit.append(len(c.scatter))
        await asyncio.sleep(0)  # (a commit takes a while, as a database's does)
        return await commit(c, *args, **kwargs)

    store.commit = counted  # type: ignore[method-assign,assignment]
    started_items.clear()
    all_started[:] = [asyncio.Event()]
    flow = (
        FlowBuilder("urn:test:flow:scatter-together")
        .scatter(
            "each",
            "numbers",
            square_at_once,
            {"all-success": "end"},
            concurrency=20,
            gather={"strategy": "append", "field": "square"},
        )
        .terminal("end")
        .build()
    )
    try:
        async with running(store=store) as (engine, _clock):
            result = await engine.run(flow, {"numbers": list(range(20))})
            records = await store.scatter_items(result.run_id, progress_key("each", 1))
            history = await engine.history(result.run_id)
    finally:
        await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["results"] == [i * i for i in range(20)]
    assert sorted(r.index for r in records) == list(range(20))
    assert sorted(r.order for r in records) == list(range(1, 21))
    assert len(of_kind(history, "scatter_item_finished")) == 20
    assert sum(stored_per_commit) == 20
    assert len(stored_per_commit) < 20
