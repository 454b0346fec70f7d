"""A worker says what it does: its heartbeat in the store, one log line per run it takes,
parks, ends or gives back, one warning per run it cannot drive (naming the node it lacks, which
clients read from the heartbeat), and a drain that lets the runs in flight settle."""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.engine.engine import DEFER_UNFIREABLE
from flowtide.engine.worker.heartbeat import is_live, waiting_for
from flowtide.model import Flow
from flowtide.store import MemoryStore, WorkerRecord
from tests.engine.engine_helpers import T0, at, freeze, fresh_store

TTL = timedelta(seconds=30)


@node(id="presence:wait", outputs=["approved"], timeout="PT10S", register=False)
async def wait_for_ok(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


@node(id="presence:slow", outputs=["done"], register=False)
async def slow(ctx: NodeContext) -> Any:
    await ctx.clock.sleep(timedelta(seconds=5))
    return "done"


NODES = NodeRegistry({"presence:wait": wait_for_ok, "presence:slow": slow})


def approval() -> Flow:
    return (
        FlowBuilder("urn:test:flow:presence")
        .task("w", wait_for_ok, {"approved": "yes", "timeout": "late"})
        .terminal("yes", "approved")
        .terminal("late", "late")
        .build()
    )


def slow_flow() -> Flow:
    builder = FlowBuilder("urn:test:flow:slow").task("s", slow, {"done": "end"})
    return builder.terminal("end").build()


async def test_an_engine_beats_while_it_takes_runs_and_forgets_its_beat_on_close() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore()
    engine = Engine(clock=clock, store=store, registry=NODES, owner="w1", heartbeat=True)
    assert list(await store.workers()) == []
    engine.sweeper  # noqa: B018 - it takes runs from now on
    await clock.settle()
    (beat,) = await store.workers()
    assert (beat.worker_id, beat.host, beat.pid) == ("w1", socket.gethostname(), os.getpid())
    assert (beat.started_at, beat.last_seen, beat.lease_ttl) == (T0, T0, 30.0)
    assert {"presence:wait", "presence:slow"} <= set(beat.nodes)
    assert (beat.runs_held, beat.waiting) == (0, {})
    await clock.advance(TTL / 3)
    (beat,) = await store.workers()
    assert (beat.started_at, beat.last_seen) == (T0, at(10))
    assert is_live(beat, at(10) + 3 * TTL) and not is_live(beat, at(11) + 3 * TTL)
    await engine.close()
    assert list(await store.workers()) == []


async def test_an_engine_on_a_virtual_clock_beats_only_when_asked() -> None:
    store = MemoryStore()
    engine = Engine(clock=VirtualClock(T0), store=store)
    engine.sweeper  # noqa: B018
    await engine.clock.settle()  # type: ignore[attr-defined]
    assert list(await store.workers()) == []
    await engine.close()


async def test_a_run_that_lacks_a_node_is_named_in_the_heartbeat_until_a_worker_takes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    first = Engine(clock=VirtualClock(T0), store=store, registry=NODES)
    flow = approval()
    run_id = (await first.run(flow)).run_id
    await first.close()  # the run is parked, its deadline at 10 s

    clock = VirtualClock(T0)
    caplog.set_level(logging.INFO, logger="flowtide.engine")
    caplog.clear()  # (the first engine's lines: another test may have left INFO on)
    stranger = Engine(clock=clock, store=store, owner="stranger", heartbeat=True)
    stranger.sweeper  # noqa: B018
    await clock.settle()
    await clock.advance_to(at(10))
    await clock.settle()
    (beat,) = await store.workers()
    assert beat.waiting == {run_id: ["presence:wait"]}
    assert waiting_for(run_id, await store.lease_of(run_id), [beat]) == ["presence:wait"]
    # Tried again once set aside no more: still one warning for the run.
    await clock.advance_to(at(10) + DEFER_UNFIREABLE)
    await clock.settle()
    assert [r.getMessage() for r in caplog.records if r.name == "flowtide.engine"] == [
        f"run {run_id[:12]} cannot be driven here: node 'presence:wait' is not registered here "
        "(a --nodes module must register it); it waits for a worker that has it"
    ]
    (beat,) = await store.workers()
    assert beat.waiting == {run_id: ["presence:wait"]}

    owner = Engine(clock=clock, store=store, registry=NODES, owner="owner")
    await stranger.close()  # (gives the run back)
    owner.sweeper  # noqa: B018
    await clock.settle()
    assert (await store.get_run(run_id)).lifecycle == Lifecycle.COMPLETED
    assert waiting_for(run_id, await store.lease_of(run_id), [beat]) == []
    await owner.close()


async def test_an_engine_logs_each_run_it_takes_parks_ends_and_gives_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    client = Engine(clock=clock, store=store, flows=[approval()], executes=False)
    parked = (await client.start(approval())).run_id
    caplog.set_level(logging.INFO, logger="flowtide.engine")
    worker = Engine(clock=clock, store=store, registry=NODES, flows=[approval()])
    worker.sweeper  # noqa: B018
    result = await worker.wait(parked)
    assert result.outcome == "late"
    at_work = await worker.start(slow_flow())
    await worker.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "flowtide.engine"]
    flow = "urn:test:flow:presence"
    assert lines == [
        f"took run {parked[:12]} (flow {flow})",
        f"run {parked[:12]} (flow {flow}) parked: given back",
        f"took run {parked[:12]} (flow {flow})",
        f"run {parked[:12]} (flow {flow}) ended: completed (late)",
        f"gave back run {at_work.run_id[:12]} (closing)",
    ]


async def test_a_drain_lets_the_nodes_in_flight_finish() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    worker = Engine(clock=clock, store=store, registry=NODES)
    running = await worker.start(slow_flow())
    await clock.settle()
    assert await worker.drain(timedelta(seconds=30)) == []
    assert clock.now() == at(5)
    run = await store.get_run(running.run_id)
    assert run.lifecycle == Lifecycle.COMPLETED


async def test_a_drain_gives_back_what_is_still_at_work_when_its_time_is_up() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    worker = Engine(clock=clock, store=store, registry=NODES, owner="w1")
    parked = (await worker.run(approval())).run_id
    running = await worker.start(slow_flow())
    await clock.settle()
    assert await worker.drain(timedelta(seconds=2)) == [running.run_id]
    assert clock.now() == at(2)
    assert (await store.get_run(running.run_id)).lifecycle == Lifecycle.RUNNING
    assert await store.lease_of(running.run_id) is None  # (given back)
    assert (await store.get_run(parked)).lifecycle == Lifecycle.PARKED
    other = Engine(clock=clock, store=store, registry=NODES)
    result = await other.wait(running.run_id)
    assert result.lifecycle == Lifecycle.COMPLETED
    await other.close()


async def test_a_worker_with_the_nodes_takes_over_a_run_set_aside_elsewhere_at_once() -> None:
    store = MemoryStore()
    first = Engine(clock=VirtualClock(T0), store=store, registry=NODES)
    run_id = (await first.run(approval())).run_id
    await first.close()

    clock = VirtualClock(T0)
    stranger = Engine(clock=clock, store=store, owner="stranger", heartbeat=True)
    stranger.sweeper  # noqa: B018
    await clock.advance_to(at(10))  # (the park's deadline: the stranger claims the run)
    assert (await store.lease_of(run_id)).owner == "stranger:aside"  # type: ignore[union-attr]
    owner = Engine(clock=clock, store=store, registry=NODES, owner="owner", heartbeat=True)
    owner.sweeper  # noqa: B018 - its first heartbeat looks for runs set aside elsewhere
    await clock.settle()
    run = await store.get_run(run_id)
    assert (run.lifecycle, run.outcome, clock.now()) == (Lifecycle.COMPLETED, "late", at(10))
    await owner.close()
    await stranger.close()


async def test_the_heartbeat_of_a_worker_gone_for_a_week_is_removed() -> None:
    clock = VirtualClock(T0 + timedelta(days=7, seconds=1))
    store = MemoryStore()
    for name, seen in (("long-gone", T0), ("gone", T0 + timedelta(seconds=1))):
        await store.record_worker(WorkerRecord(name, "h", 1, T0, seen, 30.0))
    engine = Engine(clock=clock, store=store, owner="w1", heartbeat=True)
    engine.sweeper  # noqa: B018
    await clock.settle()
    assert [w.worker_id for w in await store.workers()] == ["gone", "w1"]
    await engine.close()


@pytest.mark.usefixtures("every_store")
async def test_heartbeats_name_the_runs_set_aside_on_every_store() -> None:
    store = fresh_store()
    clock = VirtualClock(T0)
    first = Engine(clock=VirtualClock(T0), store=store, registry=NODES)
    stranger = Engine(clock=clock, store=store, owner="stranger", heartbeat=True)
    owner = Engine(clock=clock, store=store, registry=NODES, owner="owner", heartbeat=True)
    try:
        run_id = (await first.run(approval())).run_id
        await first.close()
        stranger.sweeper  # noqa: B018
        await clock.advance_to(at(10))
        await clock.settle(wait_held=True)
        (beat,) = await store.workers()
        assert (beat.worker_id, beat.last_seen, beat.waiting) == (
            "stranger",
            at(10),
            {run_id: ["presence:wait"]},
        )
        assert waiting_for(run_id, await store.lease_of(run_id), [beat]) == ["presence:wait"]
        # The stranger looks for work no more: woken by the notice of the owner giving the run
        # back, it could take it again before the owner does, and set it aside once more.
        await freeze(stranger)
        owner.sweeper  # noqa: B018 - takes the run over after its first heartbeat
        await clock.settle(wait_held=True)
        run = await store.get_run(run_id)
        assert (run.lifecycle, run.outcome) == (Lifecycle.COMPLETED, "late")
        assert waiting_for(run_id, await store.lease_of(run_id), await store.workers()) == []
        assert [w.worker_id for w in await store.workers()] == ["owner", "stranger"]
        await stranger.close()
        assert [w.worker_id for w in await store.workers()] == ["owner"]
    finally:
        await stranger.close()
        await owner.close()
        await store.close()
