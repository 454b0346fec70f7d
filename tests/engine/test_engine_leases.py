"""Runs driven under leases: held while driven, given back when parked, taken over when their
worker stops renewing, and fenced so the worker they were taken from cannot write to them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import T0, at, freeze, fresh_store, kinds, of_kind

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

keys: list[tuple[str, str]] = []
"""(engine owner, ctx.idempotency_key) of every attempt of ``slow``."""


@node(outputs=["done"])
async def slow(ctx: NodeContext) -> str:
    keys.append((ctx.state.get("worker", ""), ctx.idempotency_key))
    await ctx.clock.sleep(timedelta(seconds=100))
    return "done"


@node(outputs=["approved"])
async def approval(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    return Park(key=f"approve:{ctx.run_id}")


def slow_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:slow")
        .task("work", slow, {"done": "end"})
        .terminal("end")
        .build()
    )


def approval_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:approval")
        .task("ask", approval, {"approved": "end"})
        .terminal("end", "approved")
        .build()
    )


async def test_a_run_is_held_while_driven_and_given_back_when_it_parks() -> None:
    clock = VirtualClock(T0)
    store = fresh_store()
    engine = Engine(clock=clock, store=store, owner="w1")
    try:
        handle = await engine.start(slow_flow())
        await clock.advance(timedelta(seconds=1))
        lease = await store.lease_of(handle.run_id)
        assert lease is not None and (lease.owner, lease.epoch) == ("w1", 1)
        parked = await engine.run(approval_flow())
        assert parked.lifecycle is Lifecycle.PARKED
        assert await store.lease_of(parked.run_id) is None
        await clock.advance(timedelta(seconds=100))
        assert (await handle.result()).lifecycle is Lifecycle.COMPLETED
        assert await store.lease_of(handle.run_id) is None
    finally:
        await engine.close()
        await clock.aclose()
        await store.close()


async def test_a_frozen_workers_run_is_taken_over_and_its_late_commit_refused() -> None:
    keys.clear()
    clock = VirtualClock(T0)
    store = fresh_store()
    flow = slow_flow()
    frozen = Engine(clock=clock, store=store, owner="frozen", lease_ttl=timedelta(seconds=30))
    rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=timedelta(seconds=30))
    try:
        handle = await frozen.start(flow, {"worker": "frozen"})
        await clock.advance(timedelta(seconds=1))
        # The first worker stops renewing (frozen, or cut off from the store): its node goes on.
        await freeze(frozen)
        rescuer.sweeper  # noqa: B018 - the second worker looks for work
        await clock.advance(timedelta(seconds=200))
        result = await rescuer.wait(handle.run_id)
        history = await rescuer.history(handle.run_id)
    finally:
        await frozen.close()
        await rescuer.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED
    # Taken over at the lease's expiry (30 s) and the attempt run again there, with the same
    # idempotency key; the frozen worker's result at 100 s was refused (its lease was gone).
    assert len(keys) == 2 and keys[0][1] == keys[1][1]
    (finished,) = of_kind(history, "run_finished")
    assert finished.at == at(30) + timedelta(seconds=100)
    assert kinds(history).count("node_finished") == 1
    assert [e.seq for e in history] == list(range(1, len(history) + 1))


async def test_a_client_starts_and_signals_runs_that_a_worker_drives() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    flow = approval_flow()
    client = Engine(clock=clock, store=store, flows=[flow], executes=False, owner="client")
    worker = Engine(clock=clock, store=store, owner="worker")  # given no flow
    try:
        worker.sweeper  # noqa: B018
        handle = await client.start(flow)
        assert handle.run_id
        parked = await client.wait_parked(handle.run_id)
        assert parked.lifecycle is Lifecycle.PARKED
        assert [p.placement for p in parked.parked] == ["ask"]
        receipt = await client.signal(key=f"approve:{handle.run_id}", payload={"ok": True})
        assert receipt.placement == "ask"
        # The client made the signal's step and handed the run back: the worker ran the node.
        lease = await store.lease_of(handle.run_id)
        assert lease is None or lease.owner == "worker"
        result = await client.wait(handle.run_id)
        assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "approved")
        assert result.state["ok"] is True
    finally:
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()


@node(outputs=["done"])
async def child_step(ctx: NodeContext) -> str:
    ctx.state["child"] = "ran"
    return "done"


async def test_a_worker_runs_subflows_from_the_documents_the_run_was_started_with() -> None:
    child = FlowBuilder("urn:test:flow:child").task("c", child_step, {"done": "end"})
    child_flow = child.terminal("end").build()
    parent = (
        FlowBuilder("urn:test:flow:parent")
        .subflow("sub", child_flow, {"success": "end"}, output={"child": "child"})
        .terminal("end")
        .build()
    )
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    client = Engine(clock=clock, store=store, flows=[parent, child_flow], executes=False)
    worker = Engine(clock=clock, store=store)  # given neither flow
    try:
        worker.sweeper  # noqa: B018
        handle = await client.start(parent)
        result = await client.wait(handle.run_id)
    finally:
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["child"] == "ran"


seen_signals: list[tuple[str, Any]] = []
"""(engine owner, ctx.signal) of every attempt of ``slow_approval`` after its park."""


@node(outputs=["approved"])
async def slow_approval(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=f"approve:{ctx.run_id}")
    seen_signals.append((ctx.state.get("worker", ""), ctx.signal))
    await ctx.clock.sleep(timedelta(seconds=100))  # (the worker freezes in here)
    return "approved"


async def test_a_signalled_attempt_run_again_after_a_takeover_sees_the_signal() -> None:
    seen_signals.clear()
    clock = VirtualClock(T0)
    store = fresh_store()
    flow = (
        FlowBuilder("urn:test:flow:slow-approval")
        .task("ask", slow_approval, {"approved": "end"})
        .terminal("end", "approved")
        .build()
    )
    frozen = Engine(clock=clock, store=store, owner="frozen", lease_ttl=timedelta(seconds=30))
    rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=timedelta(seconds=30))
    try:
        handle = await frozen.start(flow, {"worker": "frozen"})
        await clock.advance(timedelta(seconds=1))
        await frozen.signal(key=f"approve:{handle.run_id}", payload={"ok": True})
        await clock.advance(timedelta(seconds=1))
        # The worker that resumed the node stops renewing in the middle of its attempt.
        await freeze(frozen)
        rescuer.sweeper  # noqa: B018
        await clock.advance(timedelta(seconds=200))
        result = await rescuer.wait(handle.run_id)
        history = await rescuer.history(handle.run_id)
    finally:
        await frozen.close()
        await rescuer.close()
        await clock.aclose()
        await store.close()
    # The attempt was run again with the signal that resumed it, not parked a second time.
    assert seen_signals == [("frozen", {"ok": True}), ("frozen", {"ok": True})]
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "approved")
    assert kinds(history).count("parked") == 1
    assert kinds(history).count("node_started") == 3
