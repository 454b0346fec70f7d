"""Workers whose clocks are wrong, on PostgreSQL.

A worker keeps time by the database's clock, measuring how far its own is off: one a minute
ahead or behind (a process, through a TCP proxy) parks a run for its timeout of the database's
time, and the park times out when the database's clock says so.

Whatever a worker has measured, the database's clock decides when a signal was recorded, whether
a deadline may fire, whether a lease has expired and whether a run is due: a worker whose clock
is 5 s ahead and who does not know it neither fires a deadline early nor accepts or refuses a
signal against its own clock; one a minute ahead or behind, beside a healthy one, takes no run
the other holds alive."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from flowtide.authoring import FlowBuilder
from flowtide.clock import SystemClock
from flowtide.engine import Engine, SignalRefused
from flowtide.model import Flow
from flowtide.store import Store
from flowtide.store.postgres import PostgresStore
from flowtide.store.urls import open_store
from tests.crash import nodes
from tests.crash.harness import ROOT
from tests.crash.proxy import Proxy
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


def test_a_worker_whose_clock_runs_ahead_judges_nothing_on_it(
    schemas: Schemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Its clock is not measured: it takes its own for the database's.)
    monkeypatch.setattr(PostgresStore, "clock_offset", Store.clock_offset)
    seen = asyncio.run(skewed(f"{schemas.url}?schema={schemas.new()}"))
    assert seen == {
        "before": ["accepted"] * 3,
        "after": ["expired"] * 3,
        "none": ["timed out"] * 3,
    }


LEASE = 2.0
"""The workers' lease (seconds) in the tests with worker processes."""
SLOW_RUNS = 4


def through(url: str, port: int) -> str:
    """``url`` with its host and port those of a proxy on this machine."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


def _process(command: list[str], log: Path, starts: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "FLOWTIDE_LOG": "WARNING",
        nodes.STARTS: str(starts),
    }
    with log.open("ab") as errors:
        return subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors
        )


def healthy_worker(url: str, log: Path, starts: Path) -> subprocess.Popen[bytes]:
    command = [
        "-m", "flowtide", "worker", "--nodes", "tests.crash.nodes", "--store", url,
        "--lease", str(LEASE), "--poll", "0.05", "--quiet",
    ]  # fmt: skip
    return _process(command, log, starts)


def skewed_worker(
    url: str, skew: float, log: Path, starts: Path, *, measured: bool = False
) -> subprocess.Popen[bytes]:
    """A worker process whose clock is ``skew`` seconds off; unless ``measured``, it takes its
    clock for the database's (see :mod:`tests.crash.skewed_worker`)."""
    command = ["-m", "tests.crash.skewed_worker", url, str(skew), str(LEASE)]
    return _process(command if measured else [*command, "unmeasured"], log, starts)


def slow_flow() -> Flow:
    return (
        FlowBuilder("urn:flowtide:test:slow")
        .task("slow", "crash:slow", {"done": "end"})
        .terminal("end")
        .build()
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def beside_a_skewed_worker(url: str, skew: float, logs: Path) -> Counter[str]:
    """Runs of a few-second node, with a healthy worker and one whose clock is ``skew``
    seconds off, both reaching the database through a proxy: how many times each run's node
    started."""
    starts = logs / "starts"
    starts.touch()
    async with Proxy(*_host_and_port(url)) as proxy:
        proxied = through(url, proxy.port)
        workers = [
            healthy_worker(proxied, logs / "healthy.log", starts),
            skewed_worker(proxied, skew, logs / "skewed.log", starts),
        ]
        store = await open_store(url)
        client = Engine(store=store, clock=SystemClock(), executes=False, flows=[slow_flow()])
        try:
            for _ in range(200):
                if len(await store.workers()) == len(workers):
                    break
                await asyncio.sleep(0.05)
            ids = [(await client.start("urn:flowtide:test:slow")).run_id for _ in range(SLOW_RUNS)]
            for run_id in ids:
                await _ended(store, run_id, 0.1)
        finally:
            for worker in workers:
                await asyncio.to_thread(_stop, worker)
            await client.close()
            await store.close()
    return Counter(starts.read_text().split())


def _host_and_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


@pytest.mark.parametrize("skew", [60.0, -60.0], ids=["ahead", "behind"])
def test_a_worker_whose_clock_is_a_minute_off_takes_no_live_run(
    schemas: Schemas, tmp_path: Path, skew: float
) -> None:
    url = f"{schemas.url}?schema={schemas.new()}"
    started = asyncio.run(beside_a_skewed_worker(url, skew, tmp_path))
    logs = {p.name: p.read_text() for p in tmp_path.glob("*.log")}
    assert len(started) == SLOW_RUNS, logs
    assert set(started.values()) == {1}, (started, logs)


TIMEOUT = timedelta(seconds=1.5)
"""The park timeout of ``crash:await-answer``."""
NEAR = timedelta(seconds=1)
"""How far a park's deadline may be from the database's clock plus its timeout (a measured
offset is off by at most half a round trip through the proxy: milliseconds)."""
ON_TIME = timedelta(seconds=5)
"""How soon after its deadline a park must be seen to have timed out (a minute: too late)."""
PARKED_RUNS = 3


async def _database_now(url: str) -> datetime:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute("SELECT clock_timestamp()")
        row = await cursor.fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


@dataclass
class Timed:
    """A run parked by the skewed worker: the database's clock when it was started and when its
    park was seen, the park's deadline, the database's clock when its end was seen, and how it
    ended."""

    started: datetime
    parked: datetime
    deadline: datetime
    ended: datetime
    outcome: str | None


async def parked_by_a_skewed_worker(server: str, url: str, skew: float, logs: Path) -> list[Timed]:
    """Runs that park with a timeout, taken by a worker whose clock is ``skew`` seconds off and
    who measures it, reaching the database (``url``, on ``server``) through a proxy."""
    async with Proxy(*_host_and_port(url)) as proxy:
        worker = skewed_worker(
            through(url, proxy.port), skew, logs / "skewed.log", logs / "starts", measured=True
        )
        store = await open_store(url)
        client = Engine(store=store, clock=SystemClock(), executes=False, flows=[race_flow()])
        try:
            for _ in range(200):
                if await store.workers():
                    break
                await asyncio.sleep(0.05)

            async def one() -> Timed:
                started = await _database_now(server)
                run_id = (await client.start("urn:flowtide:test:race")).run_id
                for _ in range(1500):
                    if parks := await store.parks(run_id=run_id):
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError(f"run {run_id} did not park within 30 s")
                parked = await _database_now(server)
                await _ended(store, run_id, 0.02)
                ended = await _database_now(server)
                deadline, outcome = parks[0].deadline, (await store.get_run(run_id)).outcome
                assert deadline is not None
                return Timed(started, parked, deadline, ended, outcome)

            return list(await asyncio.gather(*(one() for _ in range(PARKED_RUNS))))
        finally:
            await asyncio.to_thread(_stop, worker)
            await client.close()
            await store.close()


@pytest.mark.parametrize("skew", [60.0, -60.0], ids=["ahead", "behind"])
def test_a_worker_whose_clock_is_a_minute_off_times_a_park_out_by_the_databases_clock(
    schemas: Schemas, tmp_path: Path, skew: float
) -> None:
    url = f"{schemas.url}?schema={schemas.new()}"
    (tmp_path / "starts").touch()
    timed = asyncio.run(parked_by_a_skewed_worker(schemas.url, url, skew, tmp_path))
    log = (tmp_path / "skewed.log").read_text()
    for run in timed:
        assert run.started + TIMEOUT - NEAR <= run.deadline <= run.parked + TIMEOUT + NEAR, (
            run,
            log,
        )
        assert run.deadline <= run.ended <= run.deadline + ON_TIME, (run, log)
        assert run.outcome == "late", (run, log)
    way = "ahead of" if skew > 0 else "behind"
    assert f"this machine's clock is 60.0 s {way} the store's" in log, log
