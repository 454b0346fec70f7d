"""Statements planned once a connection on PostgreSQL: each prepared at its first use there (one
``Parse`` a connection, however often it runs), with a generic plan (made once, for any
parameters, as they are JSON documents and ids), which still finds a run's rows by its key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
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

RUNS = 5000


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


async def test_a_snapshot_read_has_one_generic_plan_that_finds_the_run_by_its_key(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema):  # (the schema made)
        pass
    async with await psycopg.AsyncConnection.connect(schemas.url, autocommit=True) as conn:
        await conn.execute(sql.SQL(Q["set_search_path"]).format(schema=sql.Identifier(schema)))
        await conn.execute(Q["set_plan_cache_mode"])
        # (Runs enough, and counted, that reading all of them would cost more than the index.)
        await conn.execute(
            "INSERT INTO runs (id, flow_id, flow_version, lifecycle, created_at, depth, result,"
            " options, checkpoint, epoch) SELECT 'r' || i, 'f', '1', 'running', now(), 0,"
            " 'null', '{}', '{}', 0 FROM generate_series(1, %s) AS i",
            (RUNS,),
        )
        await conn.execute("ANALYZE runs")
        params = {"run_ids": text_array(["r7"]), "parked": "parked"}
        for _ in range(USES):
            await conn.execute(Q["load_runs_whole"], params, prepare=True)
        cursor = await conn.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
        )
        [(name, generic, custom)] = await cursor.fetchall()
        assert (generic, custom) == (USES, 0)
        text = Q["load_runs_whole"]  # (its parameters numbered in the order they come in it)
        numbered = sorted(params, key=lambda key: text.index(f"%({key})s"))
        explain = sql.SQL("EXPLAIN EXECUTE {}({})").format(
            sql.Identifier(name), sql.SQL(", ").join(params[key] for key in numbered)
        )
        plan = "\n".join(str(row[0]) for row in await (await conn.execute(explain)).fetchall())
    assert "runs_pkey" in plan, plan
    assert "Seq Scan on runs" not in plan, plan
