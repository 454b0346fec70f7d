"""The SQLite store: every store check on a fresh file, then what only a database file has: its
schema and versions, the files it refuses, and many connections (and processes) sharing it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide.store import (
    Commit,
    EventRecord,
    Lease,
    LeaseLost,
    SignalRequest,
    StoreError,
    TokenStatus,
)
from flowtide.store.base import StoreOpenError, StoreSchemaError
from flowtide.store.sqlite import SQLiteStore
from flowtide.store.sqlite import store as sqlite_store
from flowtide.store.sqlite.schema import CODE_VERSION, MIGRATIONS, open_database, statements
from flowtide.store.sqlite.sql import QUERIES, store_error
from flowtide.testing import StoreCheck, StoreFactory, run_store_check, store_checks
from flowtide.testing.storechecks.support import (
    T0,
    at,
    every_part,
    new_run,
    run_record,
    same_snapshot,
    seeded_run,
    snapshot,
    token,
)

SRC = Path(__file__).resolve().parents[2] / "src"
CHECKS = store_checks()
VERSIONS = [(m.version,) for m in MIGRATIONS]
"""The schema versions a new database records."""


def fresh_files(folder: Path) -> StoreFactory:
    """A factory of stores, each on a new file in ``folder``."""
    made = 0

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[SQLiteStore]:
        nonlocal made
        made += 1
        async with SQLiteStore(folder / f"store-{made}.db") as store:
            yield store

    return fresh


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
async def test_the_sqlite_store_passes(name: str, check: StoreCheck, tmp_path: Path) -> None:
    await run_store_check(fresh_files(tmp_path), check)


def rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    """What ``query`` reads from the database at ``path``, through a connection of its own."""
    conn = sqlite3.connect(path)
    try:
        return [tuple(row) for row in conn.execute(query)]
    finally:
        conn.close()


def schema_of(path: Path) -> list[tuple[Any, ...]]:
    return rows(path, "SELECT type, name, sql FROM sqlite_master ORDER BY type, name")


# -- the schema ------------


async def test_open_creates_the_schema_and_records_its_version(tmp_path: Path) -> None:
    path = tmp_path / "flowtide.db"
    store = SQLiteStore(path)
    await store.open()
    await store.open()  # (opening twice is harmless)
    await store.close()
    await store.close()
    recorded = rows(
        path, "SELECT version, name, min_reader_version, applied_at FROM flowtide_schema"
    )
    assert [r[:2] for r in recorded] == [(m.version, m.name) for m in MIGRATIONS]
    assert [r[2] for r in recorded[:2]] == [1, 2]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(recorded[0][3]))
    assert MIGRATIONS[-1].version == CODE_VERSION
    assert rows(path, "PRAGMA journal_mode") == [("wal",)]


async def test_a_store_is_opened_by_its_first_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lazy.db")
    assert await store.next_wake() is None
    await store.close()
    assert rows(tmp_path / "lazy.db", "SELECT version FROM flowtide_schema") == VERSIONS


async def test_a_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "closed.db")
    async with store:
        await new_run(store)
    with pytest.raises(StoreError, match="closed"):
        await store.get_run("r")
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore(tmp_path / "x.db", synchronous="OFF")


async def test_reopening_a_file_keeps_every_record(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    async with SQLiteStore(path, synchronous="NORMAL") as store:
        await seeded_run(store)
        await store.commit(every_part("r", "a"))
        await store.acquire_run("r", "w1", T0, at(30))
        before = await snapshot(store)
        answer = await store.signal_answer("answer-a")
    async with SQLiteStore(path) as store:
        same_snapshot(await snapshot(store), before, "the run, reopened")
        assert await store.signal_answer("answer-a") == answer
        assert await store.node_anchor("r", "anchor-a", None) == at(3)
    assert rows(path, "SELECT count(*) FROM flowtide_schema") == [(len(MIGRATIONS),)]


def future_version(path: Path, min_reader_version: int) -> None:
    """Record in ``path`` a schema version newer than this code's, as a later Flowtide would."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO flowtide_schema VALUES (?, 'later', ?, '2030-01-01T00:00:00.000Z')",
            (CODE_VERSION + 1, min_reader_version),
        )
    conn.close()


async def test_a_newer_schema_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    async with SQLiteStore(path) as store:
        await new_run(store)
    future_version(path, min_reader_version=CODE_VERSION + 1)
    schema, content = schema_of(path), path.read_bytes()
    with pytest.raises(StoreSchemaError) as refused:
        await SQLiteStore(path).open()
    message = str(refused.value)
    assert str(path) in message
    assert f"version {CODE_VERSION + 1}" in message
    assert f"up to {CODE_VERSION}" in message
    assert "upgrade Flowtide" in message
    assert "\n" not in message
    assert schema_of(path) == schema
    assert path.read_bytes() == content
    assert rows(path, "SELECT id FROM runs") == [("r",)]


async def test_a_newer_schema_this_code_may_read_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "readable.db"
    async with SQLiteStore(path) as store:
        await new_run(store)
    future_version(path, min_reader_version=CODE_VERSION)
    async with SQLiteStore(path) as store:
        assert (await store.get_run("r")).lifecycle == "running"
    assert rows(path, "SELECT version FROM flowtide_schema ORDER BY version") == [
        *VERSIONS,
        (CODE_VERSION + 1,),
    ]


async def test_a_database_of_the_first_schema_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "first.db"
    conn = sqlite3.connect(path)
    for statement in statements(MIGRATIONS[0].sql):
        conn.execute(statement)
    with conn:
        conn.execute("INSERT INTO flowtide_schema VALUES (1, 'initial', 1, '2026-01-01T00:00Z')")
    conn.close()
    async with SQLiteStore(path) as store:
        await new_run(store)
        await store.request_signal(SignalRequest("q", "r", at(1), {"placement": "p"}))
        assert (await store.signal_request("q")) == SignalRequest(
            "q", "r", at(1), {"placement": "p"}
        )
    assert rows(path, "SELECT version FROM flowtide_schema ORDER BY version") == VERSIONS


async def test_a_file_that_is_not_a_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"These are notes, not a database. " * 100)
    with pytest.raises(StoreOpenError) as refused:
        await SQLiteStore(path).open()
    assert str(refused.value) == (
        f"cannot open the SQLite store {path}: the file is not a SQLite database"
    )
    assert path.read_bytes() == b"These are notes, not a database. " * 100


async def test_a_sqlite_database_of_something_else_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.close()
    with pytest.raises(StoreSchemaError) as refused:
        await SQLiteStore(path).open()
    assert str(refused.value) == (
        f"cannot open the SQLite store {path}: it is a SQLite database without Flowtide's "
        "schema (its tables: invoices)"
    )
    assert [name for _, name, _ in schema_of(path)] == ["invoices"]


async def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "flowtide.db"
    with pytest.raises(StoreOpenError) as refused:
        await SQLiteStore(path).open()
    assert str(refused.value) == (
        f"cannot open the SQLite store {path}: the directory {path.parent} does not exist"
    )
    assert not path.parent.exists()
    with pytest.raises(StoreOpenError, match="is a directory"):
        await SQLiteStore(tmp_path).open()


def test_the_migrations_make_exactly_the_schema_the_store_uses(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        for statement in statements(migration.sql):
            conn.execute(statement)
    made = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex_%' "
        "ORDER BY type, name"
    ).fetchall()
    assert made == [
        ("index", "due_by_instant"),
        ("index", "flows_by_order"),
        ("index", "parks_by_key"),
        ("index", "parks_by_run"),
        ("index", "runs_by_flow_document"),
        ("index", "runs_by_lifecycle"),
        ("index", "runs_by_owner"),
        ("index", "runs_by_wake"),
        ("index", "signal_requests_pending"),
        ("table", "anchors"),
        ("table", "due"),
        ("table", "flows"),
        ("table", "flowtide_schema"),
        ("table", "history"),
        ("table", "parks"),
        ("table", "run_state"),
        ("table", "runs"),
        ("table", "scatter_items"),
        ("table", "signal_answers"),
        ("table", "signal_requests"),
        ("table", "tokens"),
        ("table", "workers"),
    ]
    tables = {name for kind, name in made if kind == "table"}
    queries = list(QUERIES.values())
    named = {
        name for query in queries for name in re.findall(r"(\w+) AS (?:MATERIALIZED )?\(", query)
    }
    used = {
        name
        for query in queries
        for name in re.findall(r"\b(?:FROM|INTO|(?<!DO )UPDATE)\s+(\w+)", query)
        if name not in ("sqlite_master", "json_each", *named)
    }
    assert used == tables
    for name, query in QUERIES.items():  # every statement compiles against the schema
        conn.execute("EXPLAIN " + query, dict.fromkeys(re.findall(r":(\w+)", query))).fetchall()
        assert name
    conn.close()


def test_a_migration_is_run_one_statement_at_a_time() -> None:
    script = (
        "-- a header\nCREATE TABLE t (x TEXT DEFAULT 'a;b');\n"
        "CREATE TRIGGER g AFTER INSERT ON t BEGIN\n  UPDATE t SET x = 'c;d';\nEND;\n"
        "-- nothing after this\n"
    )
    assert list(statements(script)) == [
        "-- a header\nCREATE TABLE t (x TEXT DEFAULT 'a;b');",
        "CREATE TRIGGER g AFTER INSERT ON t BEGIN\n  UPDATE t SET x = 'c;d';\nEND;",
    ]
    assert list(statements("SELECT 1; SELECT 2")) == ["SELECT 1;", "SELECT 2;"]


def plan(query: str) -> str:
    """How SQLite runs ``query`` on the store's schema (EXPLAIN QUERY PLAN), one step a line."""
    conn = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        for statement in statements(migration.sql):
            conn.execute(statement)
    params = dict.fromkeys(re.findall(r":(\w+)", query), 1)
    steps = conn.execute("EXPLAIN QUERY PLAN " + query, params).fetchall()
    conn.close()
    return "\n".join(step[3] for step in steps)


@pytest.mark.parametrize(
    "name",
    [
        "next_wake",
        "claim_runs",
        "acquire_run",
        "settle_run",
        "renew_leases",
        "release_runs",
        "due_of",
    ],
)
def test_finding_work_reads_indexes_only(name: str) -> None:
    """Claims, wake instants and a run's earliest due entry are index probes: their cost does
    not grow with the number of runs or of waiting tokens (a claim reads the runs it takes, at
    most its limit, through, no more)."""
    steps = plan(QUERIES[name]).replace("SCAN json_each VIRTUAL TABLE", "(the ids given)")
    steps = re.sub(r"SCAN (claimable|c|held|h)$", "(the runs taken)", steps, flags=re.MULTILINE)
    assert "SCAN" not in steps, steps
    assert "TEMP B-TREE" not in steps, steps


async def test_a_commit_at_the_same_instant_keeps_microseconds(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "us.db") as store:
        await new_run(store)
        assert await store.claim_runs("w", at(1), at(2), limit=0) == []
        when = at(0.000001)
        await store.commit(Commit("r", tokens=[token("r", 1, deadline=when, due=at(-1e6))]))
        kept = await store.token("r", "r.1")
        assert kept is not None
        assert (kept.deadline, kept.due) == (when, at(-1e6))
        assert kept.deadline is not None and kept.deadline.utcoffset() == timedelta(0)


# -- errors ------------


async def test_a_step_is_one_transaction_of_five_statements_one_bound_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def traced(path: str, synchronous: str) -> sqlite3.Connection:
        conn = open_database(path, synchronous)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(sqlite_store, "open_database", traced)
    lease = Lease("r", "w", 1, at(60))
    async with SQLiteStore(tmp_path / "steps.db") as store:
        await store.create_run(run_record("r"), {}, lease=lease)
        seen.clear()
        await store.commit(
            Commit(
                "r",
                tokens=[token("r", 1)],
                events=[EventRecord("a", "r", T0), EventRecord("b", "r", T0)],
                lease=lease,
                run_lifecycles=frozenset({"running"}),
            )
        )
        step = [" ".join(statement.split()[:3]) for statement in seen]
    assert step == [
        "BEGIN IMMEDIATE",
        "SELECT lifecycle, owner,",  # (what the step is checked against, and its last seq)
        "INSERT INTO tokens",
        "INSERT INTO history",  # (one statement, bound for each event)
        "INSERT INTO history",
        "COMMIT",
    ]


async def test_sqlite_errors_are_store_errors(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    async with SQLiteStore(path) as store:
        await new_run(store)
        conn = sqlite3.connect(path)
        conn.execute("DROP TABLE history")
        conn.close()
        with pytest.raises(StoreError, match=r"broken\.db failed: OperationalError: no such table"):
            await store.history("r")
    locked = store_error(sqlite3.OperationalError("database is locked"), "/data/f.db")
    assert type(locked) is StoreError
    assert str(locked).startswith("the SQLite store /data/f.db is locked")


# -- many connections ------------


@contextlib.asynccontextmanager
async def two_stores(path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two stores on one file: two connections, each in its own thread."""
    async with (
        SQLiteStore(path, synchronous="NORMAL") as one,
        SQLiteStore(path, synchronous="NORMAL") as other,
    ):
        yield one, other


async def test_two_connections_never_claim_one_run_twice(tmp_path: Path) -> None:
    async with two_stores(tmp_path / "shared.db") as (one, other):
        owners: dict[str, str] = {}
        created = 0
        for _ in range(200):
            for _ in range(3):
                await one.create_run(run_record(f"r{created}", "pending"), {})
                created += 1
            claims = await asyncio.gather(
                one.claim_runs("one", at(1), at(100), limit=2),
                other.claim_runs("other", at(1), at(100), limit=2),
            )
            for owner, leases in zip(("one", "other"), claims, strict=True):
                for lease in leases:
                    assert lease.run_id not in owners, f"{lease.run_id} claimed twice"
                    owners[lease.run_id] = owner
        for lease in await other.claim_runs("other", at(1), at(100), limit=1000):
            assert lease.run_id not in owners
            owners[lease.run_id] = "other"
        assert len(owners) == created
        assert set(owners.values()) == {"one", "other"}
        for run_id, owner in owners.items():
            held = await one.lease_of(run_id)
            assert held is not None and held.owner == owner


async def test_a_commit_under_a_lease_taken_over_elsewhere_is_refused(tmp_path: Path) -> None:
    async with two_stores(tmp_path / "fenced.db") as (worker, other):
        old = Lease("r", "w1", 1, at(10))
        await worker.create_run(run_record("r"), {"n": 1}, lease=old)
        await worker.commit(Commit("r", tokens=[token("r", 1)], lease=old))
        assert await other.acquire_run("r", "w2", at(5), at(50)) is None
        taken = await other.acquire_run("r", "w2", at(11), at(50))
        assert taken == Lease("r", "w2", 2, at(50), taken_from="w1")
        with pytest.raises(LeaseLost, match="held by 'w2' at epoch 2, not 'w1' at epoch 1"):
            await worker.commit(
                Commit("r", state={"n": 2}, tokens=[token("r", 1, TokenStatus.DONE)], lease=old)
            )
        assert await worker.get_state("r") == {"n": 1}
        kept = await worker.token("r", "r.1")
        assert kept is not None and kept.status is TokenStatus.RUNNING
        await other.commit(Commit("r", state={"n": 3}, lease=taken))
        assert await worker.get_state("r") == {"n": 3}


async def test_wait_changed_sees_another_connections_commit(tmp_path: Path) -> None:
    async with two_stores(tmp_path / "notice.db") as (waiter, writer):
        await new_run(waiter)
        await waiter.commit(Commit("r", state={"own": 1}))
        started = time.monotonic()
        assert await waiter.wait_changed(0.1) is False  # (its own commits are not news)
        assert time.monotonic() - started >= 0.1

        async def write_soon() -> None:
            await asyncio.sleep(0.05)
            await writer.commit(Commit("r", state={"other": 1}))

        started = time.monotonic()
        writing = asyncio.create_task(write_soon())
        assert await waiter.wait_changed(0.5) is True
        assert time.monotonic() - started < 0.4
        await writing
        assert await waiter.wait_changed(0.05) is False


# -- many processes ------------

SHARER = """
import asyncio, json, sys
from datetime import UTC, datetime, timedelta
from flowtide.store.base import RunRecord
from flowtide.store.sqlite import SQLiteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def main(path: str, owner: str) -> None:
    print("ready", flush=True)
    sys.stdin.readline()
    async with SQLiteStore(path, synchronous="NORMAL") as store:
        for i in range(150):
            await store.create_run(RunRecord(f"{owner}-{i}", "urn:f", "1", "pending", T0), {})
        print("created", flush=True)
        sys.stdin.readline()
        now = T0 + timedelta(seconds=10)
        taken = []
        while leases := await store.claim_runs(owner, now, now + timedelta(hours=1), limit=1):
            taken += [lease.run_id for lease in leases]
    print(json.dumps(taken), flush=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def step(started: list[subprocess.Popen[str]], said: str) -> None:
    """Tell every process to go on, then wait until each has said ``said``."""
    for process in started:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in started:
        assert process.stdout is not None
        assert process.stdout.readline() == f"{said}\n"


def test_processes_sharing_one_new_file(tmp_path: Path) -> None:
    """Four processes open one new file at once (one of them migrates it), each creates runs,
    then all claim runs until none is left: no run is claimed twice."""
    path = tmp_path / "shared.db"
    python_path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    started = [
        subprocess.Popen(
            [sys.executable, "-c", SHARER, str(path), f"p{n}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": python_path},
        )
        for n in range(4)
    ]
    try:
        for process in started:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
        step(started, "created")
        for process in started:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        taken = [json.loads(process.communicate(timeout=15)[0]) for process in started]
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert [process.returncode for process in started] == [0, 0, 0, 0]
    assert rows(path, "SELECT version FROM flowtide_schema") == VERSIONS
    every = [run_id for claimed in taken for run_id in claimed]
    assert len(every) == len(set(every)) == 600
    assert sum(1 for claimed in taken if claimed) >= 2, "the processes' claims did not overlap"
    owners: dict[str, str] = dict(rows(path, "SELECT id, owner FROM runs"))
    for n, claimed in enumerate(taken):
        assert all(owners[run_id] == f"p{n}" for run_id in claimed)
