"""Taking a run into an engine (``RunTaking``): a run is rebuilt once however many callers ask
for it at once, and a claimed run that is gone is passed over."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext, Park
from flowtide.model import Flow
from flowtide.store import Lease, MemoryStore, RunSnapshot
from tests.engine.engine_helpers import T0, running


class CountingLoads(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load_run(self, run_id: str) -> RunSnapshot:
        self.loads += 1
        await asyncio.sleep(0)  # (a database answers later: the other callers come meanwhile)
        return await super().load_run(run_id)


@node(outputs=["approved"])
async def asks(ctx: NodeContext) -> Any:
    return "approved" if ctx.signal is not None else Park()


def asking_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:taking")
        .task("ask", asks, {"approved": "end"})
        .terminal("end", "approved")
        .build()
    )


async def test_a_run_asked_for_by_many_callers_at_once_is_rebuilt_once() -> None:
    store = CountingLoads()
    async with running(store=store, flows=[asking_flow()]) as (first, _):
        parked = await first.run(asking_flow())
        assert parked.run_id not in first.held_runs()  # (let go: nothing of it in memory)
    async with running(store=store, flows=[asking_flow()]) as (engine, _):
        before = store.loads
        handles = await asyncio.gather(*(engine.resume(parked.run_id) for _ in range(5)))
        assert store.loads - before == 1
        assert engine.held_runs() == [parked.run_id]
        await engine.signal(parked.run_id, placement="ask", output="approved")
        results = await asyncio.gather(*(h.result() for h in handles))
    assert {r.outcome for r in results} == {"approved"}


async def test_a_claimed_run_that_is_gone_is_passed_over() -> None:
    async with running() as (engine, _):
        gone = Lease("gone", engine.owner, 1, T0 + timedelta(seconds=30))
        assert await engine.taking.take([gone], T0) == 0
        assert engine.held_runs() == []
