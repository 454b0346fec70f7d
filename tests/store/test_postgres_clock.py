"""The PostgreSQL store reads the database's clock against a local one, and an engine on a
clock a minute off keeps time by the database's: a park it makes times out a timeout after the
database's now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.store.base import ClockReading
from tests.postgres_schemas import Schemas

MINUTE = timedelta(minutes=1)
NEAR = timedelta(seconds=2)
"""How far a measured offset may be from the skew it measures (the round trip to a database
on this machine is a few milliseconds, even on a busy one)."""


class SkewedClock(SystemClock):
    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return super().now() + self.skew


def database_now(url: str) -> datetime:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now.astimezone(UTC)


async def test_the_store_reads_how_far_its_clock_is_from_a_local_one(schemas: Schemas) -> None:
    async with schemas.store() as store:
        ahead = await store.clock_offset(SkewedClock(-MINUTE).now)
        behind = await store.clock_offset(SkewedClock(MINUTE).now)
        store.own_clock = False  # (as an engine on a virtual clock says)
        none = await store.clock_offset(SkewedClock(MINUTE).now)
    for reading, skew in ((ahead, MINUTE), (behind, -MINUTE)):
        assert timedelta(0) <= reading.round_trip < NEAR
        assert abs(reading.ahead - skew) < NEAR, reading
    assert none == ClockReading(timedelta(0), timedelta(0))


@node(id="test:postgres-clock:ask", outputs=["answered"], timeout="PT1H")
async def ask(ctx: NodeContext) -> Any:
    return Park(key=f"ask-{ctx.run_id}")


async def test_an_engine_a_minute_off_parks_for_an_hour_of_the_databases_time(
    schemas: Schemas,
) -> None:
    flow = (
        FlowBuilder("urn:test:postgres-clock")
        .task("ask", ask, {"answered": "done"})
        .terminal("done", "done")
        .build()
    )
    for skew in (MINUTE, -MINUTE):
        async with schemas.store() as store:
            engine = Engine(store=store, clock=SkewedClock(skew), flows=[flow], poll=0.05)
            try:
                before = database_now(schemas.url)
                result = await engine.run(flow)
                after = database_now(schemas.url)
                (park,) = await store.parks(run_id=result.run_id)
            finally:
                await engine.close()
        assert park.deadline is not None
        hour = timedelta(hours=1)
        assert before + hour - NEAR <= park.deadline <= after + hour + NEAR, (skew, park)
