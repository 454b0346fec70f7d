"""A commit sent whole on PostgreSQL: one statement, one round trip; refused, it changes nothing;
and a commit that had to wait for another transaction of its run is judged on what that one
left, not on what the statement saw when it began."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from flowtide.store import (
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    Lease,
    LeaseLost,
    RunRecord,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.postgres import PostgresStore
from tests.postgres_schemas import Schemas
from tests.store.wire import RoundTrips

T0 = datetime(2026, 1, 1, tzinfo=UTC)
P = TokenStatus.PARKED
TABLES = ("runs", "state", "tokens", "events", "due", "parks", "node_anchors", "signal_answers")
"""The tables a refused commit is checked not to have changed."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run_record(run_id: str, lifecycle: str = "running") -> RunRecord:
    return RunRecord(run_id, "urn:flowtide:test", "1", lifecycle, T0, options={"entrypoint": None})


def everything(schemas: Schemas, schema: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the store's tables, each table's in one order."""
    return {
        table: schemas.query(f"SELECT * FROM {{schema}}.{table} ORDER BY 1, 2", schema)
        for table in TABLES
    }


def parked(run_id: str, lease: Lease, *events: EventRecord) -> Commit:
    """A run parked at a node for a signal, with a timeout due."""
    return Commit(
        run_id,
        tokens=[TokenRecord(f"{run_id}.1", run_id, "ask", P)],
        events=list(events),
        due=[DueEntry(at(600), run_id, f"{run_id}.1", "timeout")],
        lease=lease,
    )


def step(run_id: str, lease: Lease, n: int) -> Commit:
    """An engine's step: state, a token moved and two events, under the run's lease."""
    return Commit(
        run_id,
        state={"n": n},
        tokens=[TokenRecord(f"{run_id}.1", run_id, f"p{n}", TokenStatus.RUNNING)],
        events=[EventRecord("a", run_id, at(n)), EventRecord("b", run_id, at(n))],
        lease=lease,
        run_lifecycles=frozenset({"running"}),
    )


async def warm_up(store: PostgresStore) -> None:
    """A step of another run: counted after it are the step's statements as every later step
    sends them (its statement is prepared on the connection at its first use, which costs a
    round trip of its own, once)."""
    lease = Lease("warm", "w", 1, at(86400))
    await store.create_run(run_record("warm"), {"n": 0}, lease=lease)
    await store.commit(step("warm", lease, 1))


async def test_a_step_is_one_statement_in_one_round_trip(schemas: Schemas) -> None:
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=1)
        async with store:
            lease = Lease("r", "w", 1, at(86400))
            await store.create_run(run_record("r"), {"n": 0}, lease=lease)
            await warm_up(store)
            for n in range(1, 4):
                sent, before = len(wire.sent), wire.count
                events = await store.commit(step("r", lease, n))
                assert wire.count - before == 1
                assert wire.sent[sent:].count("B") == 1, wire.sent[sent:]
                assert [e.seq for e in events] == [2 * n - 1, 2 * n]
            assert await store.get_state("r") == {"n": 3}
            token = await store.token("r", "r.1")
            assert token is not None and token.placement == "p3"
            assert [e.seq for e in await store.history("r")] == [1, 2, 3, 4, 5, 6]


async def test_a_run_parked_at_its_creation_is_one_statement_in_one_round_trip(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schema, min_size=1, max_size=1)
        async with store:
            # (Another run made so first: its statement is prepared on the connection at its
            # first use, a round trip of its own, once; counted is every later use.)
            warm = Lease("warm", "w", 1, at(86400))
            event = EventRecord("parked", "warm", at(0), "ask", 1, "warm.1")
            await store.create_run(
                run_record("warm"), {"n": 0}, parked("warm", warm, event), lease=warm
            )
            lease = Lease("r", "w", 1, at(86400))
            first = parked("r", lease, EventRecord("parked", "r", at(0), "ask", 1, "r.1"))
            sent, before = len(wire.sent), wire.count
            events = await store.create_run(run_record("r"), {"n": 0}, first, lease=lease)
            assert wire.count - before == 1
            assert wire.sent[sent:].count("B") == 1, wire.sent[sent:]
            assert [e.seq for e in events] == [1]
            assert await store.get_state("r") == {"n": 0}
            assert await store.due_of("r") == first.due
            held = await store.lease_of("r")
            assert held is not None and (held.owner, held.epoch) == ("w", 1)
            before_again = everything(schemas, schema)
            with pytest.raises(StoreError, match="exists already"):
                await store.create_run(run_record("r"), {"n": 1}, parked("r", lease), lease=lease)
            assert everything(schemas, schema) == before_again
    # Its wake instant as settle_run sets it: the earlier of its lease's end and its due entry.
    wake = schemas.query("SELECT wake_at FROM {schema}.runs WHERE id = 'r'", schema)
    assert wake == [(at(600),)]


async def test_a_refused_compare_and_set_changes_nothing(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as store:
        lease = Lease("r", "w", 1, at(86400))
        await store.create_run(run_record("r"), {"n": 0}, parked("r", lease), lease=lease)
        before = everything(schemas, schema)
        woken = Commit(
            "r",
            state={"n": 1},
            tokens=[TokenRecord("r.1", "r", "ask", TokenStatus.RUNNING)],
            events=[EventRecord("signalled", "r", at(1), "ask", 1, "r.1")],
            due_cleared=["r.1"],
            lease=lease,
            expect={"r.1": Expect(P, epoch=7)},  # (the token is at epoch 0)
            run_lifecycles=frozenset({"running"}),
        )
        with pytest.raises(StoreConflict, match="at epoch 0, not 7"):
            await store.commit(woken)
        assert everything(schemas, schema) == before
        stale = Lease("r", "w", 2, at(86400))
        with pytest.raises(LeaseLost):
            await store.commit(step("r", stale, 1))
        assert everything(schemas, schema) == before
        with pytest.raises(StoreConflict, match="is running"):
            await store.commit(
                Commit("r", state={"n": 9}, lease=lease, run_lifecycles=frozenset({"parked"}))
            )
        assert everything(schemas, schema) == before


async def test_a_commit_that_waited_for_its_run_is_judged_on_what_it_found(
    schemas: Schemas,
) -> None:
    """Another transaction holds the run's row and moves the token a commit expects: the commit,
    sent meanwhile, waits for it, and is then refused (the token is no longer parked), though
    its statement began when it still was."""
    schema = schemas.new()
    async with schemas.store(schema) as store:
        lease = Lease("r", "w", 1, at(86400))
        await store.create_run(run_record("r"), {"n": 0}, parked("r", lease), lease=lease)
        async with await psycopg.AsyncConnection.connect(schemas.url) as other:
            await other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            await other.execute("UPDATE runs SET last_seq = last_seq WHERE id = 'r'")
            await other.execute("UPDATE tokens SET status = 'done' WHERE run_id = 'r'")
            woken = Commit(
                "r",
                state={"n": 1},
                tokens=[TokenRecord("r.1", "r", "ask", TokenStatus.RUNNING)],
                lease=lease,
                expect={"r.1": P},
            )
            sent = asyncio.ensure_future(store.commit(woken))
            await _blocked_by(other, schemas)
            await other.commit()
            with pytest.raises(StoreConflict, match="done, not parked"):
                await sent
        assert await store.get_state("r") == {"n": 0}
        token = await store.token("r", "r.1")
        assert token is not None and token.status == TokenStatus.DONE


async def _blocked_by(other: psycopg.AsyncConnection[object], schemas: Schemas) -> None:
    """Wait until a statement waits for ``other``'s locks (for ten seconds at most)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    pid = other.info.backend_pid
    async with await psycopg.AsyncConnection.connect(schemas.url, autocommit=True) as watch:
        for _ in range(1000):
            row = await (await watch.execute(query, (pid,))).fetchone()
            if row is not None and int(str(row[0])) > 0:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("no statement waited for the run's row")
