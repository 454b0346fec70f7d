"""Timeout lateness with many runs parked: how long after its deadline a park's timeout fires.

Run with ``python benchmarks/bench_lateness.py --parked 100000``. ``--parked`` runs wait far in
the future (their due entries fill the store's index); ``--due`` runs park with a 5 s window,
started one after another, and a worker's sweeper fires their deadlines. Lateness is the
``node_timed_out`` event's instant minus the park's deadline, on the system clock. SQLite by
default (``--store postgres`` for the local PostgreSQL, in a schema of its own, dropped at the
end).

On SQLite the filler runs are stored one ``create_run`` at a time. On PostgreSQL, where that
takes hours for a million, they are inserted with SQL (``generate_series``) into the store's
tables once the store has made them: the same rows ``create_run`` writes for them, the run's
wake instant (``runs.wake_at``) included, then ``VACUUM ANALYZE`` (what autovacuum does to a
table grown over time). ``--check-fill`` fills three runs both ways and compares the rows;
``--explain`` prints the plans of the claim and next-wake queries once the store is filled.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import secrets
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from machine import describe
from psycopg import sql

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.store import Commit, DueEntry, RunRecord, Store
from flowtide.store.base import ENDED_LIFECYCLES
from flowtide.store.postgres import PostgresStore
from flowtide.store.postgres.queries import Q
from flowtide.store.sqlite import SQLiteStore

POSTGRES = os.environ.get("FLOWTIDE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test")

FILLER_FLOW = "urn:bench:filler"
BULK_CHUNK = 100_000
"""Filler runs inserted by one statement (one transaction each)."""

# The rows create_run(run, {}, Commit(run.id, due=[entry])) writes for a filler run nobody
# holds: insert_run (no deadline, no parent, depth 0, result and checkpoint null, options {},
# no owner, epoch 0), set_due, then settle_run: no events (last_seq 0), and for a parked run
# nobody holds the wake instant is its earliest due entry.
BULK_RUNS = """
INSERT INTO runs (
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint,
    owner, epoch, lease_expires, wake_at, last_seq
)
SELECT
    'filler-' || i, %(flow)s, '1', 'parked', clock_timestamp(), NULL, NULL, NULL,
    NULL, NULL, 0, NULL, 'null', '{}', 'null',
    NULL, 0, NULL, %(far)s::timestamptz + i * interval '1 millisecond', 0
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
ORDER BY i
"""
BULK_DUE = """
INSERT INTO due (run_id, token_id, purpose, due_at)
SELECT
    'filler-' || i, 'filler-' || i || '.1', 'timeout',
    %(far)s::timestamptz + i * interval '1 millisecond'
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
ORDER BY i
"""


@node(id="bench:wait", outputs=["answered"], timeout="PT5S", parks=True)
async def wait(ctx: NodeContext) -> Any:
    return Park(key=f"wait-{ctx.run_id}")


def flow() -> Any:
    b = FlowBuilder("urn:bench:lateness").task("wait", wait, {"answered": "end", "timeout": "end"})
    return b.terminal("end").build()


def busy_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine (every CPU: not idle, not waiting on I/O) and this process
    have been busy so far."""
    with open("/proc/stat") as f:
        ticks = [int(n) for n in f.readline().split()[1:]]
    machine = (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return machine, usage.ru_utime + usage.ru_stime


def far_away() -> datetime:
    return datetime.now(UTC) + timedelta(days=1)


async def fill(store: Store, count: int, far: datetime) -> None:
    """``count`` parked runs whose due entries are a day away (index filler)."""
    for i in range(count):
        run = RunRecord(f"filler-{i}", FILLER_FLOW, "1", "parked", datetime.now(UTC))
        due = [DueEntry(far + timedelta(milliseconds=i), run.id, f"{run.id}.1", "timeout")]
        await store.create_run(run, {}, Commit(run.id, due=due))


def connect(schema: str) -> psycopg.Connection[Any]:
    """A connection of our own to the store's schema (autocommit)."""
    connection = psycopg.connect(POSTGRES, autocommit=True)
    connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    connection.execute("SET TIME ZONE 'UTC'")
    return connection


def bulk_fill(schema: str, count: int, far: datetime, *, vacuum: bool = True) -> None:
    """What :func:`fill` stores, written with SQL in chunks of :data:`BULK_CHUNK` runs."""
    with connect(schema) as connection:
        for first in range(0, count, BULK_CHUNK):
            params = {
                "flow": FILLER_FLOW,
                "far": far,
                "first": first,
                "last": min(first + BULK_CHUNK, count) - 1,
            }
            with connection.transaction():
                connection.execute(BULK_RUNS, params)
                connection.execute(BULK_DUE, params)
        if vacuum:
            connection.execute("VACUUM ANALYZE runs")
            connection.execute("VACUUM ANALYZE due")


def drop(schema: str) -> None:
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def stored_rows(schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the schema's tables (but flowtide_schema), JSON as text; a run's
    ``created_at`` (the instant of its creation) is given as whether it is set."""
    with connect(schema) as connection:
        tables = [
            str(row[0])
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (schema,),
            )
        ]
        found = {}
        for table in tables:
            if table == "flowtide_schema":
                continue
            columns = [
                str(row[0])
                for row in connection.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    (schema, table),
                )
            ]
            shown = [
                sql.SQL("{} IS NOT NULL").format(sql.Identifier(c))
                if (table, c) == ("runs", "created_at")
                else sql.SQL("{}::text").format(sql.Identifier(c))
                for c in columns
            ]
            query = sql.SQL("SELECT {} FROM {} ORDER BY 1, 2").format(
                sql.SQL(", ").join(shown), sql.Identifier(table)
            )
            found[table] = [(*columns,), *connection.execute(query).fetchall()]
    return found


async def check_fill(count: int = 3) -> bool:
    """Fill ``count`` runs with ``create_run`` in one schema and with SQL in another; the rows
    must be the same."""
    far = far_away()
    one, other = (f"flowtide_bench_{secrets.token_hex(4)}" for _ in range(2))
    try:
        async with PostgresStore(POSTGRES, schema=one) as store:
            await fill(store, count, far)
        async with PostgresStore(POSTGRES, schema=other):
            pass
        bulk_fill(other, count, far, vacuum=False)
        made, inserted = stored_rows(one), stored_rows(other)
    finally:
        drop(one)
        drop(other)
    same = made == inserted
    for table in made:
        if made[table] != inserted[table]:
            print(
                f"{table}: create_run wrote\n  {made[table]}\nthe SQL fill wrote\n  "
                f"{inserted[table]}"
            )
    print(
        f"{count} filler runs, create_run and the SQL fill: "
        f"{'the same rows' if same else 'DIFFERENT rows'} "
        f"({', '.join(f'{t} {len(r) - 1}' for t, r in made.items())})"
    )
    return same


def explain(schema: str) -> None:
    """The plans of next_wake and claim_runs (the claim run for real, in a transaction rolled
    back), with the buffers they touched."""
    now = datetime.now(UTC)
    claim = {
        "owner": "explain",
        "now": now,
        "term": timedelta(seconds=30),
        "limit": 100,
        "ended": sorted(ENDED_LIFECYCLES),
    }
    with connect(schema) as connection:
        for name, params in (("next_wake", None), ("claim_runs", claim)):
            with connection.transaction(force_rollback=True):
                plan = connection.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + Q[name], params
                ).fetchall()
            print(f"-- {name}")
            print("\n".join(str(row[0]) for row in plan))


async def measure(store: Store, due: int, every: float = 0.0) -> list[float]:
    """Lateness of ``due`` runs parked one after another (``every`` ms apart: their deadlines
    come due at that pace; 0, as fast as they park)."""
    f = flow()
    async with Engine(store=store, flows=[f], clock=SystemClock()) as engine:
        runs = []
        for _ in range(due):
            runs.append((await engine.run(f)).run_id)
            if every:
                await asyncio.sleep(every / 1000)
        for run_id in runs:
            await engine.wait(run_id)
        late = []
        for run_id in runs:
            (park,) = await store.parks(run_id=run_id)
            fired = [e for e in await store.history(run_id) if e.kind == "node_timed_out"]
            assert park.deadline is not None and fired
            late.append((fired[0].at - park.deadline).total_seconds() * 1000)
    return late


async def main(args: argparse.Namespace) -> None:
    if args.check_fill and not await check_fill():
        sys.exit(1)
    schema = f"flowtide_bench_{secrets.token_hex(4)}"
    if args.store == "sqlite":
        store: Store = SQLiteStore(Path(tempfile.mkdtemp()) / "lateness.db")
    else:
        store = PostgresStore(POSTGRES, schema=schema)
    try:
        async with store:
            start = time.perf_counter()
            if args.store == "sqlite":
                await fill(store, args.parked, far_away())
            else:
                bulk_fill(schema, args.parked, far_away())
            print(
                f"{args.parked} parked runs stored in {time.perf_counter() - start:.0f} s",
                flush=True,
            )
            if args.explain and args.store == "postgres":
                explain(schema)
            (machine, own), start = busy_seconds(), time.perf_counter()
            late = sorted(await measure(store, args.due, args.every))
            (machine_after, own_after), wall = busy_seconds(), time.perf_counter() - start
            print(
                f"while measuring ({wall:.1f} s): the machine's {os.cpu_count()} CPUs were busy "
                f"{(machine_after - machine) / wall * 100:.0f} % of one CPU's time, this "
                f"process {(own_after - own) / wall * 100:.0f} %"
            )
    finally:
        if args.store == "postgres":
            drop(schema)
    p50 = statistics.median(late)
    p99 = late[int(len(late) * 0.99) - 1]
    print(
        f"{args.store}, {args.parked} parked, {args.due} due: lateness p50 {p50:.1f} ms, "
        f"p99 {p99:.1f} ms, max {late[-1]:.1f} ms (min {late[0]:.1f} ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--parked", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=300)
    parser.add_argument(
        "--every", type=float, default=0.0, help="ms between the due runs' starts (0: at once)"
    )
    parser.add_argument("--check-fill", action="store_true", help="PostgreSQL: check the fill")
    parser.add_argument("--explain", action="store_true", help="PostgreSQL: plans when filled")
    print(describe())
    asyncio.run(main(parser.parse_args()))
