"""A worker whose clock runs 5 s ahead, on PostgreSQL: the database's clock decides when a
signal was recorded and whether a deadline may fire, so the worker neither fires a deadline
early nor accepts or refuses a signal against its own clock."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from flowtide.clock import SystemClock
from flowtide.engine import Engine, SignalRefused
from flowtide.store import Store
from flowtide.store.urls import open_store
from tests.crash.race import race_flow
from tests.postgres_schemas import Schemas

AHEAD = timedelta(seconds=5)


class AheadClock(SystemClock):
    """The system clock, ``AHEAD`` ahead (a machine whose clock is wrong)."""

    def now(self) -> datetime:
        return super().now() + AHEAD


async def _until(condition: float) -> None:
    await asyncio.sleep(max(0.0, condition - time.time()))


async def _ended(store: Store, run_id: str, every: float) -> None:
    """Once the run has completed (looked at every ``every`` seconds)."""
    for _ in range(int(60 / every)):
        if (await store.get_run(run_id)).lifecycle == "completed":
            return
        await asyncio.sleep(every)
    raise AssertionError(f"run {run_id} did not end within a minute")


async def skewed(url: str, runs: int = 9) -> dict[str, list[str]]:
    """Runs parked by a worker ``AHEAD`` ahead: a third signalled a second before their
    deadline (past it on the worker's clock), a third half a second after it, a third left to
    time out. What happened to each, by group."""
    worker_store, client_store = await open_store(url), await open_store(url)
    flows = [race_flow()]
    worker = Engine(store=worker_store, clock=AheadClock(), flows=flows, poll=0.05)
    client = Engine(store=client_store, clock=SystemClock(), executes=False, flows=flows)
    seen: dict[str, list[str]] = {"before": [], "after": [], "none": []}
    try:
        worker.sweeper  # noqa: B018 - the worker takes the runs
        ids = [(await client.start("urn:flowtide:test:race")).run_id for _ in range(runs)]
        deadlines: dict[str, datetime] = {}
        while len(deadlines) < runs:
            for run_id in ids:
                parks = await client_store.parks(run_id=run_id)
                if parks and parks[0].deadline is not None:
                    deadlines[run_id] = parks[0].deadline
            await asyncio.sleep(0.02)
        groups = {run_id: ("before", "after", "none")[i % 3] for i, run_id in enumerate(ids)}

        async def one(run_id: str) -> None:
            group, deadline = groups[run_id], deadlines[run_id]
            if group == "none":
                await _ended(client_store, run_id, 0.01)
                ended = datetime.now(UTC)
                early = ended < deadline
                seen[group].append("early" if early else "timed out")
                return
            offset = -1.0 if group == "before" else 0.5
            await _until(deadline.timestamp() + offset)
            try:
                await client.signal(key=f"answer-{run_id}", payload={})
                seen[group].append("accepted")
            except SignalRefused as refused:
                seen[group].append(refused.reason)

        await asyncio.wait_for(asyncio.gather(*(one(r) for r in ids)), 60)
        for run_id in ids:
            await _ended(client_store, run_id, 0.05)
            kinds = Counter(e.kind for e in await client_store.history(run_id))
            assert kinds["signalled"] + kinds["node_timed_out"] == 1, (run_id, kinds)
    finally:
        await client.close()
        await worker.close()
        await client_store.close()
        await worker_store.close()
    return seen


def test_a_worker_whose_clock_runs_ahead_judges_nothing_on_it(schemas: Schemas) -> None:
    seen = asyncio.run(skewed(f"{schemas.url}?schema={schemas.new()}"))
    assert seen == {
        "before": ["accepted"] * 3,
        "after": ["expired"] * 3,
        "none": ["timed out"] * 3,
    }
