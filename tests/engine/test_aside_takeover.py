"""A run set aside by a worker that cannot drive it is taken over by one of the workers that
can, once. Two races, each tried many times (on SQLite and PostgreSQL, where a store's round
trip lets other tasks run): two such workers beating at the same instant both see the run
waiting for them, and only one may take it (the second took it from the first); and the worker
that cannot drive the run gives it back before it sets it aside, and a worker that claimed it
in between keeps it (it was taken from it)."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext
from flowtide.model import Flow
from tests.engine.engine_helpers import T0, fresh_store

pytestmark = pytest.mark.usefixtures("every_store")

TRIES = 10
started: Counter[str] = Counter()


@node(id="aside:slow", outputs=["done"], register=False)
async def slow(ctx: NodeContext) -> Any:
    started[ctx.run_id] += 1
    await ctx.clock.sleep(timedelta(seconds=5))
    return "done"


NODES = NodeRegistry({"aside:slow": slow})


def slow_flow() -> Flow:
    builder = FlowBuilder("urn:test:flow:aside").task("s", slow, {"done": "end"})
    return builder.terminal("end").build()


async def one_try() -> tuple[int, str]:
    """How many times the run's node started, and how the run ended."""
    store = fresh_store()
    clock = VirtualClock(T0)
    flow = slow_flow()
    client = Engine(clock=clock, store=store, executes=False, flows=[flow])
    stranger = Engine(clock=clock, store=store, owner="stranger", heartbeat=True)
    able = [
        Engine(clock=clock, store=store, registry=NODES, owner=f"able-{i}", heartbeat=True)
        for i in range(2)
    ]
    try:
        run_id = (await client.start(flow)).run_id
        stranger.sweeper  # noqa: B018 - it claims the run and sets it aside
        await clock.settle(wait_held=True)
        lease = await store.lease_of(run_id)
        assert lease is not None and lease.owner == "stranger:aside", lease
        for engine in able:
            engine.sweeper  # noqa: B018 - their first heartbeats look for runs set aside
        await clock.settle(wait_held=True)
        for _ in range(60):  # (the node takes 5 s; a store's round trips take real time)
            run = await store.get_run(run_id)
            if run.lifecycle == Lifecycle.COMPLETED:
                break
            await clock.advance(timedelta(seconds=1))
        return started[run_id], run.lifecycle
    finally:
        for engine in [*able, stranger, client]:
            await engine.close()
        await store.close()
        await clock.aclose()


async def test_two_workers_that_can_drive_a_run_set_aside_take_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="flowtide.engine")
    seen = []
    for _ in range(TRIES):
        caplog.clear()
        ran, lifecycle = await one_try()
        takings = sum(r.getMessage().startswith("took run") for r in caplog.records)
        seen.append((takings, ran, lifecycle))
    assert seen == [(1, 1, Lifecycle.COMPLETED)] * TRIES
