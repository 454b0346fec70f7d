"""Child runs (subflows) are runs of their own in the store: signalled from another process,
taken over with their parent, cancelled with it, never started twice for one visit."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, RunResult
from flowtide.engine.run.children import child_run_id, open_parks
from flowtide.model import Flow
from flowtide.store import Store
from tests.engine.engine_helpers import T0, at, freeze, fresh_store, kinds, of_kind, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

ran: list[str] = []
"""The owner of the engine that ran each attempt of ``slow_child``."""


@node(outputs=["approved"])
async def child_approval(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        ctx.state["answer"] = ctx.signal.get("answer")
        return "approved"
    return Park(key=f"approve:{ctx.state['order']}")


@node(outputs=["done"])
async def slow_child(ctx: NodeContext) -> str:
    ran.append(ctx.state.get("worker", ""))
    await ctx.clock.sleep(timedelta(seconds=100))
    ctx.state["answer"] = "slow"
    return "done"


@node(outputs=["go"])
async def fork(ctx: NodeContext) -> str:
    return "go"


def parent_of(child: Flow) -> Flow:
    return (
        FlowBuilder(f"{child.id}:parent")
        .subflow("sub", child, {"success": "end"}, output={"answer": "answer"})
        .terminal("end", "done")
        .build()
    )


def child_beside_work(child: Flow) -> Flow:
    """A parent that runs ``child`` as a subflow beside a long node (``slow_child``), then
    joins them."""
    return (
        FlowBuilder("urn:test:flow:child-beside-work")
        .task("fork", fork, {"go": ["sub", "work"]})
        .subflow("sub", child, {"success": "both"}, output={"answer": "answer"})
        .task("work", slow_child, {"done": "both"})
        .join("both", "all", {"success": "end"})
        .terminal("end", "done")
        .build()
    )


def approval_child() -> Flow:
    b = FlowBuilder("urn:test:flow:child-approval").task("ask", child_approval, {"approved": "end"})
    return b.terminal("end").build()


def slow_child_flow() -> Flow:
    b = FlowBuilder("urn:test:flow:slow-child").task("work", slow_child, {"done": "end"})
    return b.terminal("end").build()


async def until_parked(store: Store, key: str) -> str:
    """The run id of the open park at ``key``, once there is one. (Looked for in real time, as
    the store changes: its engines' round trips take real time, however fast a virtual clock
    in autojump mode goes; a clock advanced by hand is advanced by the test first.)"""
    for _ in range(600):
        parks = await store.parks(key=key, open_only=True)
        if parks:
            return parks[0].run_id
        await store.wait_changed(0.05)
    raise AssertionError(f"nothing parked at {key!r}")


async def until_let_go(engine: Engine) -> None:
    """Once ``engine`` holds no run (a run is seen parked a moment before it is let go)."""
    for _ in range(600):
        if not engine.held_runs():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still held: {engine.held_runs()}")


async def children_of(store: Store, parent_id: str) -> list[str]:
    return [r.id for r in await store.list_runs() if r.parent_run_id == parent_id]


async def test_a_parked_child_signalled_by_a_client_finishes_its_parent() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    client = Engine(clock=clock, store=store, flows=[parent, child], executes=False)
    worker = Engine(clock=clock, store=store)  # drives the parent and its child
    try:
        worker.sweeper  # noqa: B018
        handle = await client.start(parent, {"order": "o1"})
        child_id = await until_parked(store, "approve:o1")
        # The worker holds the child (parked, like its parent): the signal goes through the
        # store to it, and the child's end finishes the parent.
        await client.signal(key="approve:o1", payload={"answer": "yes"})
        result = await asyncio.wait_for(client.wait(handle.run_id), 60)
        history = await client.history(handle.run_id)
    finally:
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "done")
    assert result.state["answer"] == "yes"
    (finished,) = of_kind(history, "subflow_finished")
    assert finished.data["child"] == child_id


async def test_a_parent_taken_over_waits_for_the_child_it_had_started() -> None:
    ran.clear()
    child = slow_child_flow()
    parent = parent_of(child)
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    frozen = Engine(clock=clock, store=store, flows=[parent, child], owner="frozen", lease_ttl=ttl)
    rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=ttl)
    try:
        handle = await frozen.start(parent, {"worker": "frozen"})
        await clock.advance(timedelta(seconds=1))
        # The worker that drives the parent and its child stops renewing their leases.
        await freeze(frozen)
        rescuer.sweeper  # noqa: B018
        await clock.advance(timedelta(seconds=200))
        result = await asyncio.wait_for(rescuer.wait(handle.run_id), 60)
        history = await rescuer.history(handle.run_id)
        children = await children_of(store, handle.run_id)
    finally:
        await frozen.close()
        await rescuer.close()
        await clock.aclose()
        await store.close()
    assert (result.lifecycle, result.state["answer"]) == (Lifecycle.COMPLETED, "slow")
    # One child for the one visit: taken over with its parent (its node ran again, at least
    # once), not started a second time by the rebuilt parent.
    assert children == [child_run_id(handle.run_id, f"{handle.run_id}.1", "sub", 1, 1)]
    assert ran == ["frozen", "frozen"]
    assert kinds(history).count("subflow_started") == 1
    (finished,) = of_kind(history, "run_finished")
    assert finished.at == at(30) + timedelta(seconds=100)


async def test_cancelling_a_parent_cancels_a_child_driven_apart_from_it() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    first = Engine(clock=clock, store=store, flows=[parent, child], owner="first", lease_ttl=ttl)
    second = Engine(clock=clock, store=store, owner="second", lease_ttl=ttl)
    try:
        handle = await first.start(parent, {"order": "o2"})
        child_id = await until_parked(store, "approve:o2")
        await asyncio.wait_for(first.wait_parked(handle.run_id), 60)
        # Both parked: let go (no lease, nothing in memory). The first worker stops; the
        # second takes the parent to cancel it, apart from its child.
        await until_let_go(first)
        assert [await store.lease_of(r) for r in (handle.run_id, child_id)] == [None, None]
        await freeze(first)
        second.sweeper  # noqa: B018
        await clock.sleep(timedelta(seconds=60))
        assert await second.cancel(handle.run_id, "order withdrawn")
        result = await asyncio.wait_for(second.wait(handle.run_id), 60)
        child_result = await asyncio.wait_for(second.wait(child_id), 60)
    finally:
        await first.close()
        await second.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.CANCELLED
    assert child_result.lifecycle is Lifecycle.CANCELLED


async def test_a_parent_whose_child_waits_parked_is_parked_and_says_where() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    engine = Engine(clock=clock, store=store, flows=[parent, child])
    try:
        parked = await asyncio.wait_for(engine.run(parent, {"order": "o3"}), 60)
        stored = await store.get_run(parked.run_id)
        child_id = await until_parked(store, "approve:o3")
        receipt = await engine.signal(key="approve:o3", payload={"answer": "later"})
        result = await asyncio.wait_for(engine.wait(parked.run_id), 60)
    finally:
        await engine.close()
        await clock.aclose()
        await store.close()
    assert parked.lifecycle is Lifecycle.PARKED and stored.lifecycle == "parked"
    (waiting,) = parked.parked
    assert (waiting.run_id, waiting.placement, waiting.key) == (child_id, "ask", "approve:o3")
    assert RunResult.from_dict(parked.to_dict()).parked == parked.parked  # (as stored)
    assert receipt.run_id == child_id
    assert (result.lifecycle, result.state["answer"]) == (Lifecycle.COMPLETED, "later")


async def test_a_parent_with_a_parked_child_and_a_busy_branch_is_not_parked() -> None:
    child = approval_child()
    parent = child_beside_work(child)
    clock = VirtualClock(T0)
    store = fresh_store()
    engine = Engine(clock=clock, store=store, flows=[parent, child])
    try:
        handle = await engine.start(parent, {"order": "o4"})
        await clock.advance(timedelta(seconds=10))
        assert (await store.get_run(handle.run_id)).lifecycle == "running"
        # The busy branch ends: only the child's park is left, so the parent is parked.
        parked = engine.wait_parked(handle.run_id)
        await clock.advance(timedelta(seconds=100))
        result = await asyncio.wait_for(parked, 60)
        assert result.lifecycle is Lifecycle.PARKED
        assert [p.key for p in result.parked] == ["approve:o4"]
    finally:
        await engine.close()
        await clock.aclose()
        await store.close()


async def test_a_subflows_window_ends_while_its_child_waits_parked() -> None:
    child = approval_child()
    parent = (
        FlowBuilder("urn:test:flow:bounded-parent")
        .subflow("sub", child, {"success": "end", "timeout": "late"}, timeout="PT1H")
        .terminal("end", "done")
        .terminal("late", "late")
        .build()
    )
    clock = VirtualClock(T0)
    store = fresh_store()
    engine = Engine(clock=clock, store=store, flows=[parent, child])
    try:
        handle = await engine.start(parent, {"order": "o5"})
        await clock.advance(timedelta(minutes=1))
        child_id = await until_parked(store, "approve:o5")
        assert (await store.get_run(handle.run_id)).lifecycle == "parked"
        await clock.advance(timedelta(hours=1))
        result = await asyncio.wait_for(engine.wait(handle.run_id), 60)
        child_result = await asyncio.wait_for(engine.wait(child_id), 60)
    finally:
        await engine.close()
        await clock.aclose()
        await store.close()
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "late")
    # (Its parent, let go, was rebuilt at the window's end: the child is cancelled through the
    # store, saying why.)
    assert child_result.lifecycle is Lifecycle.CANCELLED
    assert "its parent's node_timeout" in json.dumps(child_result.to_dict())


@node(outputs=["done"])
async def quick(ctx: NodeContext) -> str:
    return "done"


async def test_runs_parked_take_no_room_from_a_worker_with_a_cap() -> None:
    child = approval_child()
    parent = parent_of(child)
    other = FlowBuilder("urn:test:flow:quick").task("q", quick, {"done": "end"})
    other_flow = other.terminal("end").build()
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    client = Engine(clock=clock, store=store, flows=[parent, child, other_flow], executes=False)
    worker = Engine(clock=clock, store=store, max_runs=1)
    try:
        worker.sweeper  # noqa: B018
        handle = await client.start(parent, {"order": "o6"})
        await until_parked(store, "approve:o6")
        # The parent and its child, both parked, are let go: a new run gets in.
        await asyncio.wait_for(client.wait_parked(handle.run_id), 60)
        await until_let_go(worker)
        quick_run = await client.start(other_flow)
        done = await asyncio.wait_for(client.wait(quick_run.run_id), 60)
        assert done.lifecycle is Lifecycle.COMPLETED
        await client.signal(key="approve:o6", payload={"answer": "ok"})
        result = await asyncio.wait_for(client.wait(handle.run_id), 60)
    finally:
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_open_parks_of_a_run_with_a_node_at_work_and_a_child_parked() -> None:
    child = approval_child()
    parent = child_beside_work(child)
    clock = VirtualClock(T0)
    store = fresh_store()
    engine = Engine(clock=clock, store=store, flows=[parent, child])
    try:
        handle = await engine.start(parent, {"order": "o7"})
        await clock.advance(timedelta(seconds=10))
        # A running token that is no subflow's ("work") has no child run to look into.
        (park,) = await open_parks(store, handle.run_id)
        assert (park.key, park.run_id) == (
            "approve:o7",
            await until_parked(store, "approve:o7"),
        )
    finally:
        await engine.close()
        await clock.aclose()
        await store.close()


async def test_a_client_cancelling_a_parent_cancels_its_parked_child_held_elsewhere() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    client = Engine(clock=clock, store=store, flows=[parent, child], executes=False)
    worker = Engine(clock=clock, store=store)  # holds the parent and its parked child
    try:
        worker.sweeper  # noqa: B018
        handle = await client.start(parent, {"order": "o8"})
        child_id = await until_parked(store, "approve:o8")
        assert await client.cancel(handle.run_id, "order withdrawn")
        result = await asyncio.wait_for(client.wait(handle.run_id), 60)
        child_result = await asyncio.wait_for(client.wait(child_id), 60)
        (cancelled,) = of_kind(await client.history(child_id), "run_finished")
    finally:
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.CANCELLED
    # Not left parked for ever: the parent's cancel (applied by the worker that holds both)
    # cancels it, saying why.
    assert child_result.lifecycle is Lifecycle.CANCELLED
    assert "order withdrawn" in json.dumps(cancelled.data)


@node(outputs=["done"])
async def say_which(ctx: NodeContext) -> str:
    ctx.state["which"] = ctx.run_id
    return "done"


async def test_a_token_going_from_one_subflow_to_the_next_starts_a_child_at_each() -> None:
    """Visits are counted per placement: the token is at visit 1 of each subflow, and each
    starts a child of its own (the second does not find the first one's again)."""
    child = FlowBuilder("urn:test:flow:which").task("say", say_which, {"done": "end"})
    first = child.terminal("end").build()
    parent = (
        FlowBuilder("urn:test:flow:one-then-other")
        .subflow("first", first, {"success": "second"}, output={"one": "which"})
        .subflow("second", first, {"success": "end"}, output={"other": "which"})
        .terminal("end", "done")
        .build()
    )
    async with running(flows=[parent, first]) as (engine, _):
        result = await asyncio.wait_for(engine.run(parent, {}), 60)
        children = await children_of(engine.store, result.run_id)
    token = f"{result.run_id}.1"
    one, other = (child_run_id(result.run_id, token, p, 1, 1) for p in ("first", "second"))
    assert result.lifecycle is Lifecycle.COMPLETED
    assert (result.state["one"], result.state["other"]) == (one, other)
    assert sorted(children) == sorted([one, other])
