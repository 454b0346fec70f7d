"""Timeout lateness with many runs parked: how long after its deadline a park's timeout fires.

Run with ``python benchmarks/bench_lateness.py --parked 100000``. ``--parked`` runs wait far in
the future (their due entries fill the store's index); ``--due`` runs park with a 5 s window,
started one after another, and a worker's sweeper fires their deadlines. Lateness is the
``node_timed_out`` event's instant minus the park's deadline, on the system clock. SQLite by
default (``--store postgres`` for the local PostgreSQL, in a schema of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from machine import describe

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.store import Commit, DueEntry, RunRecord, Store
from flowtide.store.postgres import PostgresStore
from flowtide.store.sqlite import SQLiteStore

POSTGRES = os.environ.get("FLOWTIDE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test")


@node(id="bench:wait", outputs=["answered"], timeout="PT5S", parks=True)
async def wait(ctx: NodeContext) -> Any:
    return Park(key=f"wait-{ctx.run_id}")


def flow() -> Any:
    b = FlowBuilder("urn:bench:lateness").task("wait", wait, {"answered": "end", "timeout": "end"})
    return b.terminal("end").build()


async def fill(store: Store, count: int) -> None:
    """``count`` parked runs whose due entries are a day away (index filler)."""
    far = datetime.now(UTC) + timedelta(days=1)
    for i in range(count):
        run = RunRecord(f"filler-{i}", "urn:bench:filler", "1", "parked", datetime.now(UTC))
        due = [DueEntry(far + timedelta(milliseconds=i), run.id, f"{run.id}.1", "timeout")]
        await store.create_run(run, {}, Commit(run.id, due=due))


async def measure(store: Store, due: int) -> list[float]:
    f = flow()
    async with Engine(store=store, flows=[f], clock=SystemClock()) as engine:
        runs = [(await engine.run(f)).run_id for _ in range(due)]
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
    if args.store == "sqlite":
        store: Store = SQLiteStore(Path(tempfile.mkdtemp()) / "lateness.db")
    else:
        store = PostgresStore(POSTGRES, schema=f"flowtide_bench_{secrets.token_hex(4)}")
    async with store:
        start = time.perf_counter()
        await fill(store, args.parked)
        print(f"{args.parked} parked runs stored in {time.perf_counter() - start:.0f} s")
        late = sorted(await measure(store, args.due))
    p50 = statistics.median(late)
    p99 = late[int(len(late) * 0.99) - 1]
    print(f"{args.store}, {args.parked} parked, {args.due} due: lateness p50 {p50:.1f} ms, "
          f"p99 {p99:.1f} ms, max {late[-1]:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--parked", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=300)
    print(describe())
    asyncio.run(main(parser.parse_args()))
