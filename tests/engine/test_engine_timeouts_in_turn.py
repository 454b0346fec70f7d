"""Parked runs whose deadlines come one after another each time out at its own deadline: the
runs a worker's sweeper is firing (their wake instants passed, still theirs until their firing
commits) do not hide the next deadline from it, on every store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import T0, fresh_store

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["answered"], register=False)
async def waits(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


def parks(timeout: str) -> Flow:
    return (
        FlowBuilder("urn:test:flow:timeouts-in-turn")
        .task("w", waits, {"answered": "end", "timeout": "late"}, timeout=timeout)
        .terminal("end")
        .terminal("late", "late")
        .build()
    )


async def test_deadlines_a_fifth_of_a_second_apart_each_fire_at_their_instant() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    flow = parks("PT5S")
    try:
        async with Engine(store=store, clock=clock, flows=[flow]) as engine:
            runs = []
            for _ in range(6):
                runs.append((await engine.run(flow)).run_id)
                await clock.sleep(timedelta(milliseconds=200))
            late = []
            for run_id in runs:
                result = await engine.wait(run_id)
                assert result.outcome == "late"
                (park,) = await store.parks(run_id=run_id)
                fired = [e for e in await store.history(run_id) if e.kind == "node_timed_out"]
                assert park.deadline is not None
                late.append(fired[0].at - park.deadline)
    finally:
        await store.close()
    assert max(late) < timedelta(milliseconds=100), late
