"""Statements planned once a connection on PostgreSQL: each prepared at its first use there (one
``Parse`` a connection, however often it runs), with a generic plan (made once, for any
parameters, as they are JSON documents and ids), which still finds runs' rows by their keys
among many runs, whatever a limit given as a parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from flowtide.store import Commit, EventRecord, Lease, RunRecord, TokenRecord, TokenStatus
from flowtide.store.postgres import PostgresStore
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import text_array
from tests.postgres_schemas import Schemas
from tests.store.wire import RoundTrips

T0 = datetime(2026, 1, 1, tzinfo=UTC)
USES = 8
"""More than psycopg's own threshold (a statement prepared at its sixth run) and PostgreSQL's
(a prepared statement planned for its parameters at each of its first five runs)."""
RUNS = 20000
"""Runs enough, and counted, that reading all of them costs more than an index does."""
ENDED = "{completed,failed,cancelled}"

Connection = psycopg.AsyncConnection[Any]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def step(run_id: str, lease: Lease, n: int) -> Commit:
    return Commit(
        run_id,
        state={"n": n},
        tokens=[TokenRecord(f"{run_id}.1", run_id, f"p{n}", TokenStatus.RUNNING)],
        events=[EventRecord("a", run_id, at(n))],
        lease=lease,
        run_lifecycles=frozenset({"running"}),
    )


async def test_a_step_and_a_snapshot_are_each_parsed_once_a_connection(schemas: Schemas) -> None:
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=1)
        async with store:
            lease = Lease("r", "w", 1, at(86400))
            record = RunRecord("r", "urn:flowtide:test", "1", "running", T0, options={})
            await store.create_run(record, {"n": 0}, lease=lease)
            sent = len(wire.sent)
            for n in range(1, USES + 1):
                await store.commit(step("r", lease, n))
            assert wire.sent[sent:].count("P") == 1, wire.sent[sent:]
            assert wire.sent[sent:].count("B") == USES
            sent = len(wire.sent)
            for _ in range(USES):
                assert (await store.load_run("r")).run.id == "r"
            assert wire.sent[sent:].count("P") == 1, wire.sent[sent:]
            assert await store.get_state("r") == {"n": USES}


@asynccontextmanager
async def many_runs(schemas: Schemas) -> AsyncIterator[Connection]:
    """A connection set as the store's are, to a store of :data:`RUNS` runs, parked with a wake
    instant each (one ended), their counts known to the planner."""
    schema = schemas.new()
    async with schemas.store(schema):  # (the schema made)
        pass
    async with await psycopg.AsyncConnection.connect(schemas.url, autocommit=True) as conn:
        await conn.execute(sql.SQL(Q["set_search_path"]).format(schema=sql.Identifier(schema)))
        await conn.execute(Q["set_plan_cache_mode"])
        await conn.execute(
            "INSERT INTO runs (id, flow_id, flow_version, lifecycle, created_at, depth, result,"
            " options, checkpoint, epoch, wake_at, parent_run_id)"
            " SELECT 'r' || i, 'f', '1', CASE WHEN i = 1 THEN 'completed' ELSE 'parked' END,"
            " now(), 0, 'null', '{}', '{}', 0, now() + i * interval '1 second', 'r' || (i + 1)"
            " FROM generate_series(1, %s) AS i",
            (RUNS,),
        )
        await conn.execute("ANALYZE runs")
        yield conn


async def generic_plan(conn: Connection, name: str, params: dict[str, Any]) -> str:
    """The plan ``conn`` keeps for statement ``name`` prepared (run :data:`USES` times with
    ``params``, and rolled back), checked to be its only one, made once."""
    text = Q[name]
    await conn.execute("BEGIN")
    for _ in range(USES):
        await conn.execute(text, params, prepare=True)
    cursor = await conn.execute(
        "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
    )
    [(prepared, generic, custom)] = await cursor.fetchall()
    assert (generic, custom) == (USES, 0)
    numbered = sorted(params, key=lambda key: text.index(f"%({key})s"))  # (as psycopg numbers)
    explain = sql.SQL("EXPLAIN EXECUTE {}({})").format(
        sql.Identifier(prepared), sql.SQL(", ").join(params[key] for key in numbered)
    )
    plan = "\n".join(str(row[0]) for row in await (await conn.execute(explain)).fetchall())
    await conn.execute("ROLLBACK")
    return plan


async def test_a_snapshot_read_has_one_generic_plan_that_finds_the_run_by_its_key(
    schemas: Schemas,
) -> None:
    async with many_runs(schemas) as conn:
        params = {"run_ids": text_array(["r7"]), "parked": "parked"}
        plan = await generic_plan(conn, "load_runs_whole", params)
    assert "runs_pkey" in plan, plan
    assert "Seq Scan on runs" not in plan, plan


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("claim_runs", {"now": None, "owner": "w", "limit": 10, "term": "30 s", "ended": ENDED}),
        ("prunable_runs", {"ended": ENDED, "after": "", "ended_before": T0, "limit": 10}),
    ],
    ids=["claim_runs", "prunable_runs"],
)
async def test_a_generic_plan_with_a_limit_given_reads_no_run_but_by_an_index(
    schemas: Schemas, name: str, params: dict[str, Any]
) -> None:
    """A plan made for any limit expects a tenth of the rows: it must still find each run (a
    claimed one, a parent) by its key, not read every run."""
    async with many_runs(schemas) as conn:
        plan = await generic_plan(conn, name, params)
    assert "Seq Scan on runs" not in plan, plan


async def test_a_claim_stops_at_the_first_run_not_due(schemas: Schemas) -> None:
    """The claim's scan of the runs by wake instant is bounded by its now (an index condition):
    with a million runs parked far ahead, a claim reads none of them."""
    params = {"now": None, "owner": "w", "limit": 10, "term": "30 s", "ended": ENDED}
    async with many_runs(schemas) as conn:
        plan = await generic_plan(conn, "claim_runs", params)
    assert "Index Cond: (wake_at <= " in plan, plan
