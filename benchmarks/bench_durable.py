"""Durable steps and parks on the stores users run: SQLite (the default) and PostgreSQL.

Run with ``python benchmarks/bench_durable.py`` (LangGraph's SQLite checkpointer and DBOS are
measured in the same run when installed: ``pip install langgraph-checkpoint-sqlite dbos``;
PostgreSQL at ``FLOWTIDE_BENCH_POSTGRES_URL``, by default the local test server, in a schema of
its own, dropped at the end). Every figure is the median of ``--runs`` runs.

* **floor**: one fsynced commit of one small row on that store, nothing else (SQLite in WAL mode
  with ``synchronous=FULL``; PostgreSQL with ``synchronous_commit=on``, a single-row INSERT on a
  logged table): what one durable step cannot go below.
* **durable step**: a 200-node chain of no-op async nodes run to its end on the store, divided by
  200: every step commits the token's move, its events and the state change in one transaction.
  LangGraph: the same chain with ``SqliteSaver`` checkpointing each step. DBOS: a workflow of 200
  no-op steps on SQLite.
* **parks/s** and **resumes/s**: ``--parks`` runs each park at their first node, then each is
  signalled and runs to its end. ``--concurrency N``: N runs started (and N signals sent) at a
  time, as a server answering N requests at once would; 1 (the default) starts them one after
  another. Several values (``--concurrency 1 64``) measure each in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

from machine import describe

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext, Park
from flowtide.model import Flow
from flowtide.store import Store
from flowtide.store.postgres import PostgresStore
from flowtide.store.sqlite import SQLiteStore

CHAIN = 200
POSTGRES = os.environ.get("FLOWTIDE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test")


@node(id="bench:step", outputs=["next"])
async def step(ctx: NodeContext) -> str:
    return "next"


@node(id="bench:ask", outputs=["answered"], parks=True)
async def ask(ctx: NodeContext) -> Any:
    return "answered" if ctx.signal is not None else Park(key=f"ask-{ctx.run_id}")


def chain() -> Flow:
    b = FlowBuilder("urn:bench:durable-chain")
    for i in range(CHAIN):
        b.task(f"n{i}", step, {"next": f"n{i + 1}" if i + 1 < CHAIN else "end"})
    return b.terminal("end").build()


def parking() -> Flow:
    return (
        FlowBuilder("urn:bench:park").task("ask", ask, {"answered": "end"}).terminal("end").build()
    )


# -- floors ------------


def sqlite_floor(folder: Path, commits: int = 500) -> float:
    """Microseconds for one committed single-row INSERT in SQLite, WAL mode,
    ``synchronous=FULL`` (the settings of the store's default)."""
    db = sqlite3.connect(folder / f"floor-{secrets.token_hex(4)}.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    start = time.perf_counter()
    for i in range(commits):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed / commits * 1e6


def postgres_floor(commits: int = 500, url: str = POSTGRES) -> float:
    """Microseconds for one committed single-row INSERT in PostgreSQL on a logged table (a
    table of its own, dropped afterwards). Not a TEMP table: those are never WAL-logged, so
    their commits wait for no flush (9 WAL syncs per 500 commits against 505 here)."""
    import psycopg

    table = f"flowtide_floor_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, v text)")
        try:
            start = time.perf_counter()
            for i in range(commits):
                # (autocommit: each INSERT is its own transaction, committed and flushed)
                db.execute(f"INSERT INTO {table} (v) VALUES (%s)", (f"row {i}",))
            return (time.perf_counter() - start) / commits * 1e6
        finally:
            db.execute(f"DROP TABLE {table}")


# -- Flowtide ------------


async def flowtide_chain(store: Store, runs: int) -> float:
    flow = chain()
    async with Engine(store=store, flows=[flow]) as engine:
        await engine.run(flow)  # warm up
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            result = await engine.run(flow)
            samples.append(time.perf_counter() - start)
            assert result.lifecycle == "completed", result
    return statistics.median(samples) / CHAIN * 1e6


async def flowtide_parks(store: Store, count: int, concurrency: int) -> tuple[float, float]:
    flow = parking()
    gate = asyncio.Semaphore(concurrency)

    async def park() -> str:
        async with gate:
            return (await engine.run(flow)).run_id

    async def signal(run_id: str) -> None:
        async with gate:
            await engine.signal(key=f"ask-{run_id}", payload={"ok": True})

    async with Engine(store=store, flows=[flow]) as engine:
        start = time.perf_counter()
        runs = await asyncio.gather(*(park() for _ in range(count)))
        parked = time.perf_counter() - start
        start = time.perf_counter()
        await asyncio.gather(*(signal(run_id) for run_id in runs))
        for run_id in runs:
            await engine.wait(run_id)
        resumed = time.perf_counter() - start
    return count / parked, count / resumed


# -- peers ------------


class S(TypedDict, total=False):
    x: int


def langgraph_chain(folder: Path, runs: int) -> float | None:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        return None

    def noop(state: S) -> dict[str, Any]:
        return {"x": 1}

    g: Any = StateGraph(S)
    for i in range(CHAIN):
        g.add_node(f"n{i}", noop)
    g.add_edge(START, "n0")
    for i in range(CHAIN - 1):
        g.add_edge(f"n{i}", f"n{i + 1}")
    g.add_edge(f"n{CHAIN - 1}", END)
    connection = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
    connection.execute("PRAGMA synchronous=FULL")
    graph = g.compile(checkpointer=SqliteSaver(connection))
    config = {"recursion_limit": CHAIN + 10}
    graph.invoke({"x": 0}, {**config, "configurable": {"thread_id": "warm"}})
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        graph.invoke({"x": 0}, {**config, "configurable": {"thread_id": f"t{i}"}})
        samples.append(time.perf_counter() - start)
    connection.close()
    return statistics.median(samples) / CHAIN * 1e6


def dbos_chain(folder: Path, runs: int) -> float | None:
    try:
        from dbos import DBOS, DBOSConfig
    except ImportError:
        return None
    config: DBOSConfig = {"name": "bench", "system_database_url": f"sqlite:///{folder / 'dbos.db'}"}
    DBOS(config=config)

    @DBOS.step()
    def noop(i: int) -> int:
        return i

    @DBOS.workflow()
    def workflow() -> int:
        total = 0
        for i in range(CHAIN):
            total += noop(i)
        return total

    DBOS.launch()
    try:
        workflow()
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            workflow()
            samples.append(time.perf_counter() - start)
    finally:
        DBOS.destroy()
    return statistics.median(samples) / CHAIN * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    print(describe())
    folder = Path(tempfile.mkdtemp(prefix="flowtide-bench-"))
    schema = f"flowtide_bench_{secrets.token_hex(4)}"

    def sqlite() -> Store:
        return SQLiteStore(folder / f"flowtide-{secrets.token_hex(4)}.db")

    def postgres() -> Store:
        return PostgresStore(POSTGRES, schema=schema)

    print(
        f"floor, one fsynced commit: SQLite {sqlite_floor(folder):.0f} µs, "
        f"PostgreSQL {postgres_floor():.0f} µs"
    )
    for name, make in (("SQLite", sqlite), ("PostgreSQL", postgres)):
        per_step = asyncio.run(flowtide_chain(make(), args.runs))
        print(f"Flowtide on {name}: durable step {per_step:.0f} µs")
        for concurrency in args.concurrency:
            figures = [
                asyncio.run(flowtide_parks(make(), args.parks, concurrency))
                for _ in range(args.runs)
            ]
            parks = statistics.median(p for p, _ in figures)
            resumes = statistics.median(r for _, r in figures)
            print(
                f"Flowtide on {name}: {parks:.0f} parks/s, {resumes:.0f} resumes/s "
                f"({args.parks} runs, {concurrency} at a time)"
            )
    lg = langgraph_chain(folder, args.runs)
    print(f"LangGraph, SqliteSaver: step {lg:.0f} µs" if lg else "LangGraph: not installed")
    db = dbos_chain(folder, args.runs)
    print(f"DBOS on SQLite: step {db:.0f} µs" if db else "DBOS: not installed")
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    sys.stdout.flush()


if __name__ == "__main__":
    main()
