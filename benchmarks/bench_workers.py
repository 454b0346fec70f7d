"""Throughput of worker processes sharing one store: runs/s and node steps/s with 1, 2 and 4
``flowtide worker`` processes.

Run with ``python benchmarks/bench_workers.py`` (PostgreSQL at ``FLOWTIDE_BENCH_POSTGRES_URL``,
by default the local test server, a fresh schema for each worker count, dropped at the end;
``--store sqlite`` for a fresh SQLite file each time).

For each worker count W:

1. W worker processes are started (``python -m flowtide worker --nodes workers_nodes --store
   URL --concurrency C --quiet``), and waited for until each has said it is taking runs, then
   for one more second: their start-up (imports, the store's opening) is not timed.
2. A client (``Engine(store=..., executes=False)``, in this process) starts ``--runs`` runs of
   a chain of ``--nodes`` no-op async nodes, ``--batch`` starts at a time.
3. The time is from just before the first start to the last run's ``finished_at`` as stored
   (the instant of its last commit, on the same clock): the polling of the client, which
   watches for every run to end, does not round it.

While it runs, the CPU time (user + system, from ``/proc``) of the workers, of the PostgreSQL
backends serving this benchmark (found by their ``application_name`` in ``pg_stat_activity``;
the server's shared writers are not counted) and of this process (the client) are read, with
the whole machine's busy time (``/proc/stat``): each is given as a share of one CPU over the
time measured (from the first start until the client saw every run end), and "others" is what
the rest of the machine was busy with meanwhile: other programs sharing it, the kernel's own
work, the server's shared processes (WAL writer, checkpointer). On a machine of few CPUs, they
say which side is busy. On SQLite the database's work is done in the workers and the client
(there is no server), so there is no backends column; the CPU per step is given too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import workers_nodes
from machine import describe
from psycopg import sql

from flowtide.authoring import FlowBuilder
from flowtide.clock import SystemClock
from flowtide.engine import Engine
from flowtide.model import Flow
from flowtide.store import Store
from flowtide.store.urls import open_store

POSTGRES = os.environ.get("FLOWTIDE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TICK = os.sysconf("SC_CLK_TCK")
ENDED = {"completed", "failed", "cancelled", "timed_out"}


def chain(length: int) -> Flow:
    b = FlowBuilder("urn:bench:workers-chain")
    for i in range(length):
        nxt = f"n{i + 1}" if i + 1 < length else "end"
        b.task(f"n{i}", workers_nodes.STEP, {"next": nxt})
    return b.terminal("end").build()


# -- CPU time from /proc ------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # (utime, stime: fields 14 and 15)


def backends(application: str) -> list[int]:
    """The PostgreSQL backends of the connections named ``application``."""
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchall()
    return [int(row[0]) for row in rows]


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (every CPU: not idle, not waiting on I/O)."""
    with open("/proc/stat") as f:
        ticks = [int(n) for n in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / TICK


def client_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CPU:
    """CPU seconds of the workers, the postgres processes and the client, at one instant."""

    workers: dict[int, float]
    postgres: dict[int, float]
    client: float
    machine: float

    @classmethod
    def read(cls, workers: list[int], application: str | None) -> CPU:
        pg = backends(application) if application is not None else []
        return cls(
            {pid: cpu_seconds(pid) for pid in workers},
            {pid: cpu_seconds(pid) for pid in pg},
            client_seconds(),
            machine_busy(),
        )

    def since(self, before: CPU) -> tuple[float, float, float, float]:
        """Seconds spent between ``before`` and this reading: workers, their backends, client,
        the rest of the machine (a backend started in between counts from zero)."""
        workers = sum(t - before.workers.get(pid, 0.0) for pid, t in self.workers.items())
        pg = sum(t - before.postgres.get(pid, 0.0) for pid, t in self.postgres.items())
        client = self.client - before.client
        others = self.machine - before.machine - workers - pg - client
        return workers, pg, client, others


# -- one measurement ------------


@dataclass
class Figures:
    workers: int
    runs: int
    steps: int
    wall: float
    started_in: float
    cpu_workers: float
    cpu_postgres: float
    cpu_client: float
    cpu_others: float
    window: float
    """The seconds the CPU times were read over (until the client saw every run end)."""


async def start_workers(
    url: str, count: int, concurrency: int | None, poll: float, log: Path
) -> list[asyncio.subprocess.Process]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)]),
        "FLOWTIDE_LOG": os.environ.get("FLOWTIDE_LOG", "WARNING"),
    }
    command = [
        sys.executable, "-m", "flowtide", "worker", "--nodes", "workers_nodes",
        "--store", url, "--poll", str(poll), "--quiet",
    ]  # fmt: skip
    if concurrency:
        command += ["--concurrency", str(concurrency)]
    with log.open("ab") as errors:
        workers = [
            await asyncio.create_subprocess_exec(
                *command, cwd=HERE, env=env, stdout=asyncio.subprocess.PIPE, stderr=errors
            )
            for _ in range(count)
        ]
    for process in workers:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if b"taking runs" not in line:
            raise RuntimeError(f"a worker did not start: {line!r} (see {log})")
    await asyncio.sleep(1.0)
    return workers


async def stop_workers(workers: list[asyncio.subprocess.Process]) -> None:
    for process in workers:
        if process.returncode is None:
            process.terminate()
    for process in workers:
        try:
            await asyncio.wait_for(process.communicate(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def until_ended(store: Store, runs: int, patience: float) -> list[datetime]:
    """The runs' ``finished_at`` once every run has ended (raises if one did not complete)."""
    end = time.monotonic() + patience
    while time.monotonic() < end:
        stored = await store.list_runs()
        if len(stored) == runs and all(r.lifecycle in ENDED for r in stored):
            bad = [r for r in stored if r.lifecycle != "completed"]
            if bad:
                raise RuntimeError(f"{len(bad)} runs did not complete, e.g. {bad[0]}")
            return [r.finished_at for r in stored if r.finished_at is not None]
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the runs did not end within {patience} s")


async def measure(
    url: str, application: str | None, count: int, args: argparse.Namespace, log: Path
) -> Figures:
    flow = chain(args.nodes)
    workers = await start_workers(url, count, args.concurrency, args.poll, log)
    store = await open_store(url)
    client = Engine(store=store, clock=SystemClock(), executes=False, flows=[flow])
    try:
        before = CPU.read([w.pid for w in workers], application)
        t0 = time.perf_counter()
        start = datetime.now(UTC)
        left = args.runs
        while left:
            now = min(left, args.batch)
            await asyncio.gather(*(client.start(flow.id) for _ in range(now)))
            left -= now
        started_in = time.perf_counter() - t0
        finished = await until_ended(store, args.runs, args.patience)
        window = time.perf_counter() - t0
        after = CPU.read([w.pid for w in workers], application)
    finally:
        await client.close()
        await store.close()
        await stop_workers(workers)
    wall = (max(finished) - start).total_seconds()
    cpu = after.since(before)
    return Figures(count, args.runs, args.runs * args.nodes, wall, started_in, *cpu, window)


def drop_schema(schema: str) -> None:
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        connection.execute(drop)


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="flowtide-bench-workers-"))
    log = folder / "workers.log"
    concurrency = args.concurrency or "no limit"
    print(
        f"{args.store}: {args.runs} runs of {args.nodes} no-op async nodes, "
        f"worker concurrency {concurrency}, {args.batch} starts at a time"
    )
    print(
        "workers | runs/s | steps/s | wall | all started after | CPU seconds (share of one "
        "CPU): workers | their backends | client | others | CPU µs per step: workers | backends"
    )
    try:
        for count in args.workers:
            if args.store == "postgres":
                schema = f"flowtide_bench_{secrets.token_hex(4)}"
                application: str | None = schema
                url = f"{POSTGRES}?schema={schema}&application_name={application}"
            else:
                application = None
                url = f"sqlite:///{folder / f'workers-{count}.db'}"
            try:
                f = await measure(url, application, count, args, log)
            finally:
                if args.store == "postgres":
                    drop_schema(schema)
            share = f.window / 100  # (CPU seconds as percent of the window)
            on_server = application is not None
            backends_cpu = f"{f.cpu_postgres:.2f} s ({f.cpu_postgres / share:.0f} %)"
            per_step = f"{f.cpu_postgres / f.steps * 1e6:.0f}"
            print(
                f"{f.workers} | {f.runs / f.wall:.0f} | {f.steps / f.wall:.0f} | {f.wall:.2f} s | "
                f"{f.started_in:.2f} s | {f.cpu_workers:.2f} s ({f.cpu_workers / share:.0f} %) | "
                f"{backends_cpu if on_server else '-'} | "
                f"{f.cpu_client:.2f} s ({f.cpu_client / share:.0f} %) | "
                f"{f.cpu_others:.2f} s ({f.cpu_others / share:.0f} %) | "
                f"{f.cpu_workers / f.steps * 1e6:.0f} | {per_step if on_server else '-'}",
                flush=True,
            )
    finally:
        said = log.read_text(errors="replace").strip() if log.exists() else ""
        if said:
            print(f"the workers said (stderr):\n{said[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=10, help="nodes in the chain")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="runs a worker drives at once (0: no limit)"
    )
    parser.add_argument("--poll", type=float, default=1.0, help="the workers' --poll")
    parser.add_argument("--batch", type=int, default=10, help="runs the client starts at once")
    parser.add_argument("--patience", type=float, default=600.0)
    print(describe())
    asyncio.run(main(parser.parse_args()))
