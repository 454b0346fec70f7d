"""The PostgreSQL store: every store check, its schema and how it is opened, and what many
stores (many workers, many processes) sharing one schema may and may not do."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import flowtide
from flowtide.store import (
    Commit,
    DeadlineAhead,
    DueEntry,
    DuplicateSignal,
    EventRecord,
    Expect,
    Lease,
    LeaseLost,
    LeaseTake,
    RequestAnswer,
    RunRecord,
    SignalAnswer,
    SignalRequest,
    Store,
    StoreConflict,
    StoreDown,
    StoreNotReady,
    StoreOpenError,
    StoreSchemaError,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.postgres import PostgresStore
from flowtide.store.postgres.schema import CODE_VERSION, MIGRATIONS
from flowtide.testing import StoreCheck, StoreFactory, run_store_check, store_checks
from tests.postgres_schemas import Schemas
from tests.store.wire import RoundTrips

T0 = datetime(2026, 1, 1, tzinfo=UTC)
P = TokenStatus.PARKED
CHECKS = store_checks()
VERSIONS = [(m.version,) for m in MIGRATIONS]
"""The schema versions a new schema records."""
SOURCE = str(Path(flowtide.__file__).resolve().parents[1])
"""The folder ``flowtide`` is imported from, for the processes the tests start."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run_record(run_id: str, lifecycle: str = "pending") -> RunRecord:
    return RunRecord(run_id, "urn:flowtide:test", "1", lifecycle, T0, options={"entrypoint": None})


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
async def test_the_postgres_store_passes(
    name: str, check: StoreCheck, postgres_stores: StoreFactory
) -> None:
    await run_store_check(postgres_stores, check)


# -- the schema ------------


async def test_open_creates_the_schema_and_records_its_version(schemas: Schemas) -> None:
    store = schemas.store()
    async with store:
        await store.open()  # (opening twice is harmless)
        await store.create_run(run_record("r"), {"n": 1})
    versions = schemas.query(
        "SELECT version, name, min_reader_version FROM {schema}.flowtide_schema", store.schema
    )
    assert [v[:2] for v in versions] == [(m.version, m.name) for m in MIGRATIONS]
    assert [v[2] for v in versions[:2]] == [1, 2]
    tables = schemas.query(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
        store.schema,
        store.schema,
    )
    assert ("runs",) in tables and ("flowtide_schema",) in tables
    assert schemas.query("SELECT id FROM {schema}.runs", store.schema) == [("r",)]


async def test_reopening_a_schema_keeps_its_records(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as first:
        await first.create_run(
            run_record("r", "running"),
            {"n": 1},
            Commit(
                "r", events=[EventRecord("started", "r", at(1))], due=[DueEntry(at(5), "r", "r.1")]
            ),
        )
    async with schemas.store(schema) as again:
        assert (await again.get_run("r")) == run_record("r", "running")
        assert await again.get_state("r") == {"n": 1}
        assert [e.seq for e in await again.history("r")] == [1]
        assert list(await again.due_of("r")) == [DueEntry(at(5), "r", "r.1")]
        (event,) = await again.commit(Commit("r", events=[EventRecord("next", "r", at(2))]))
        assert event.seq == 2
    rows = schemas.query("SELECT version FROM {schema}.flowtide_schema ORDER BY version", schema)
    assert rows == VERSIONS


async def test_a_newer_schema_is_refused_unchanged_unless_this_code_may_read_it(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema):
        pass
    later = CODE_VERSION + 1
    schemas.query(
        f"INSERT INTO {{schema}}.flowtide_schema VALUES ({later}, 'later', {later}, now())", schema
    )
    before = schemas.query("SELECT * FROM {schema}.flowtide_schema ORDER BY version", schema)
    with pytest.raises(StoreSchemaError) as refused:
        await schemas.store(schema).open()
    message = str(refused.value)
    assert f"version {later}" in message and f"up to {CODE_VERSION}" in message
    assert "upgrade Flowtide" in message
    assert isinstance(refused.value, StoreOpenError)
    after = schemas.query("SELECT * FROM {schema}.flowtide_schema ORDER BY version", schema)
    assert after == before
    # A later version that this code may still use (min_reader_version its own) is accepted.
    schemas.query(
        f"UPDATE {{schema}}.flowtide_schema SET min_reader_version = {CODE_VERSION} "
        f"WHERE version = {later}",
        schema,
    )
    async with schemas.store(schema) as store:
        await store.create_run(run_record("r"), {})
    versions = schemas.query(
        "SELECT version FROM {schema}.flowtide_schema ORDER BY version", schema
    )
    assert versions == [*VERSIONS, (later,)], "nothing migrated, nothing recorded"


async def test_a_schema_that_is_not_flowtides_is_refused(schemas: Schemas) -> None:
    schema = schemas.new()
    schemas.query("CREATE SCHEMA {schema}", schema)
    schemas.query("CREATE TABLE {schema}.orders (id int)", schema)
    with pytest.raises(StoreSchemaError, match="not Flowtide's"):
        await schemas.store(schema).open()
    tables = schemas.query("SELECT tablename FROM pg_tables WHERE schemaname = %s", schema, schema)
    assert tables == [("orders",)], "the schema is left as it was"


async def test_concurrent_opens_of_a_fresh_schema_migrate_it_once(schemas: Schemas) -> None:
    schema = schemas.new()
    stores = [schemas.store(schema, max_size=2) for _ in range(4)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        await stores[0].create_run(run_record("r"), {})
        for store in stores:
            assert (await store.get_run("r")).id == "r"
    finally:
        for store in stores:
            await store.close()
    assert (
        schemas.query("SELECT version FROM {schema}.flowtide_schema ORDER BY version", schema)
        == VERSIONS
    )


async def test_schemas_of_one_database_do_not_meet(schemas: Schemas) -> None:
    async with schemas.store() as one, schemas.store() as other:
        await one.create_run(run_record("r"), {"in": "one"})
        await other.create_run(run_record("r"), {"in": "other"})
        assert await one.get_state("r") == {"in": "one"}
        assert await other.get_state("r") == {"in": "other"}
        # Listening for sure, and nothing of its own left to hear (judged by notices, not by
        # how long one takes: a busy machine delays them). A first wait opens the listening
        # connection (or, too slow, leaves it to the next wait, which ends at once then);
        # after it, a run of its own is heard.
        await one.wait_changed(0.5)
        await one.create_run(run_record("probe"), {})
        assert await one.wait_changed(10), "its own notice"
        # Another schema's notice, then one of its own: notices come in commit order, so one
        # of another schema would be here before its own, and still be heard after it.
        await other.create_run(run_record("s"), {})
        await one.create_run(run_record("mine"), {})
        assert await one.wait_changed(10), "its own notice"
        assert await one.wait_changed(0.5) is False, "a notice of another schema's store"


async def test_a_schema_name_is_quoted_as_an_identifier(schemas: Schemas) -> None:
    odd = f'{schemas.new()} "Odd" Name; DROP'
    schemas.names.append(odd)
    async with schemas.store(odd) as store, schemas.store(odd) as other:
        assert await store.wait_changed(0.01) is False
        woke, _ = await asyncio.gather(
            store.wait_changed(10), other.create_run(run_record("r"), {"n": 1})
        )
        assert woke is True
        assert [lease.run_id for lease in await store.claim_runs("w", at(1), at(9))] == ["r"]
    rows = schemas.query("SELECT id, owner FROM {schema}.runs", odd)
    assert rows == [("r", "w")]


async def test_instants_come_back_in_utc_as_written(postgres_stores: StoreFactory) -> None:
    paris = timezone(timedelta(hours=1))
    written = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=paris)
    async with postgres_stores() as store:
        await store.create_run(
            run_record("r"), {}, Commit("r", due=[DueEntry(written, "r", "r.1")])
        )
        (entry,) = await store.due_of("r")
        assert entry.when == written and entry.when.tzinfo is UTC
        assert (await store.get_run("r")).created_at.tzinfo is UTC


# -- opening errors ------------


@pytest.mark.parametrize(
    ("url", "reason", "for_now"),
    [
        ("postgresql://postgres:hunter2@127.0.0.1:1/test", "cannot be reached", True),
        (
            "postgresql://postgres:hunter2@127.0.0.1:5432/flowtide_no_such_db",
            "does not exist",
            False,
        ),
        ("postgresql://flowtide_no_such_role:hunter2@127.0.0.1:5432/test", "credentials", False),
        (
            "host=127.0.0.1 port=1 dbname=test user=postgres password=hunter2",
            "cannot be reached",
            True,
        ),
        ("postgresql://postgres:hunter2@127.0.0.1.invalid/test", "host name is not known", False),
    ],
    ids=["unreachable", "unknown-database", "unknown-role", "libpq-string", "unknown-host"],
)
async def test_a_database_that_cannot_be_opened_is_named_without_its_password(
    url: str, reason: str, for_now: bool
) -> None:
    """A server not there now may open later (:class:`StoreNotReady`); a wrong address or
    refused credentials never will."""
    store = PostgresStore(url, schema="flowtide_test_never")
    assert "hunter2" not in repr(store)
    with pytest.raises(StoreOpenError) as refused:
        await store.open()
    error = refused.value
    assert isinstance(error, StoreNotReady) is for_now
    message = str(error)
    assert reason in message
    assert "127.0.0.1" in message and "\n" not in message
    shown = "".join(traceback.format_exception(error))
    assert "hunter2" not in shown, shown
    await store.close()


async def test_a_server_with_no_connection_left_may_open_later(postgres_url: str) -> None:
    """SQLSTATE 53300 (too many connections) at open: the store is not ready, not wrong."""
    role = f"flowtide_test_{os.urandom(6).hex()}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
        try:
            url = make_conninfo(postgres_url, user=role, password="hunter2")
            store = PostgresStore(url, schema="flowtide_test_never")
            with pytest.raises(StoreNotReady) as refused:
                await store.open()
            await store.close()
        finally:
            admin.execute(f"DROP ROLE {role}")
    message = str(refused.value)
    assert "too many connections" in message and "hunter2" not in message, message
    assert isinstance(refused.value, StoreDown)


async def test_an_unreadable_url_is_refused_on_open_without_showing_it() -> None:
    store = PostgresStore("postgresql://po stgres:hunter2@", schema="flowtide_test_never")
    with pytest.raises(StoreOpenError) as refused:
        await store.open()
    assert "hunter2" not in str(refused.value) and "hunter2" not in repr(store)


# -- many stores on one schema ------------


async def test_racing_claims_never_hand_a_run_to_two_owners(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as one, schemas.store(schema) as two:
        for round_ in range(200):
            made = {f"r{round_}.{i}" for i in range(3)}
            for run_id in sorted(made):
                await one.create_run(run_record(run_id), {})
            now = at(round_)
            claims = await asyncio.gather(
                one.claim_runs("w1", now, now + timedelta(hours=1), limit=2),
                two.claim_runs("w2", now, now + timedelta(hours=1), limit=2),
            )
            first, second = ({lease.run_id for lease in claim} for claim in claims)
            assert not first & second, f"round {round_}: {first & second} claimed twice"
            assert first | second == made, f"round {round_}: {made - (first | second)} left"


async def test_a_commit_under_a_lease_another_store_took_over_is_refused(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as one, schemas.store(schema) as two:
        one.own_clock = two.own_clock = False  # (the lease expires at the instants given)
        mine = Lease("r", "w1", 1, at(10))
        await one.create_run(run_record("r", "running"), {"n": 1}, lease=mine)
        await one.commit(Commit("r", state={"n": 2}, lease=mine))
        (taken,) = await two.claim_runs("w2", at(11), at(60))
        assert taken == Lease("r", "w2", 2, at(60), taken_from="w1")
        with pytest.raises(LeaseLost):
            await one.commit(Commit("r", state={"n": 3}, lease=mine))
        await two.commit(Commit("r", state={"n": 4}, lease=taken))
        assert await one.get_state("r") == {"n": 4}
        assert await one.lease_of("r") == Lease("r", "w2", 2, at(60))


async def test_racing_commits_expecting_one_token_let_exactly_one_win(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as one, schemas.store(schema) as two:
        await one.create_run(run_record("r", "running"), {})
        for epoch in range(1, 101):
            parked = TokenRecord("r.1", "r", "p", P, epoch=epoch)
            await one.commit(Commit("r", tokens=[parked]))
            moves = [
                Commit(
                    "r",
                    tokens=[TokenRecord("r.1", "r", "p", TokenStatus.READY, epoch=epoch + 1)],
                    state={"won": by},
                    signal_answers=[SignalAnswer(f"{by}-{epoch}", "r", {})],
                    expect={"r.1": Expect(P, epoch)},
                )
                for by in ("one", "two")
            ]
            outcomes = await asyncio.gather(
                one.commit(moves[0]), two.commit(moves[1]), return_exceptions=True
            )
            lost = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(lost) == 1 and isinstance(lost[0], StoreConflict), outcomes
            winner = "one" if not isinstance(outcomes[0], BaseException) else "two"
            assert (await two.get_state("r"))["won"] == winner
            assert await one.signal_answer(f"{winner}-{epoch}") is not None
            loser = "two" if winner == "one" else "one"
            assert await one.signal_answer(f"{loser}-{epoch}") is None


async def test_racing_answers_to_one_signal_key_let_exactly_one_commit(schemas: Schemas) -> None:
    # Two runs, no expectation in common: the signal key alone decides (a key answered while the
    # other commit was in flight is refused by the database's key, and nothing of it stays).
    schema = schemas.new()
    async with schemas.store(schema) as one, schemas.store(schema) as two:
        await one.create_run(run_record("a", "running"), {})
        await one.create_run(run_record("b", "running"), {})
        for n in range(60):
            key = f"k{n}"
            outcomes = await asyncio.gather(
                one.commit(
                    Commit("a", state={"n": n}, signal_answers=[SignalAnswer(key, "a", {})])
                ),
                two.commit(
                    Commit("b", state={"n": n}, signal_answers=[SignalAnswer(key, "b", {})])
                ),
                return_exceptions=True,
            )
            lost = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(lost) == 1 and isinstance(lost[0], DuplicateSignal), outcomes
            answer = await one.signal_answer(key)
            winner = "a" if not isinstance(outcomes[0], BaseException) else "b"
            assert answer is not None and answer.run_id == winner
            loser = "b" if winner == "a" else "a"
            assert (await two.get_state(loser)).get("n") != n


async def test_wait_changed_wakes_when_another_store_makes_work(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as waiter, schemas.store(schema) as worker:
        started = time.monotonic()
        assert await waiter.wait_changed(0.2) is False
        assert time.monotonic() - started >= 0.19
        # A new run nobody holds: claimable at once.
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10), worker.create_run(run_record("r", "running"), {})
        )
        assert woke is True
        # A run given back.
        lease = await worker.acquire_run("r", "w", at(1), at(100))
        assert lease is not None
        await worker.commit(Commit("r", state={"x": 1}, lease=lease))
        assert await waiter.wait_changed(0.2) is False, "a held run changed: no notice"
        # A due entry set by someone other than the holder (it may not know).
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10), worker.commit(Commit("r", due=[DueEntry(at(5), "r", "r.1")]))
        )
        assert woke is True
        started = time.monotonic()
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10), worker.commit(Commit("r", lease=lease, release=True))
        )
        assert woke is True and time.monotonic() - started < 5
        # A signal answered.
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10),
            worker.commit(Commit("r", signal_answers=[SignalAnswer("k", "r", {})])),
        )
        assert woke is True
        assert await waiter.wait_changed(0.1) is False
        # A signal request stored, and the run's end (who waits for either elsewhere is told).
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10),
            worker.request_signal(SignalRequest("q", "r", at(6), {"placement": "p"})),
        )
        assert woke is True
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10), worker.commit(Commit("r", run=run_record("r", "completed")))
        )
        assert woke is True
        assert await waiter.wait_changed(0.1) is False


async def test_wait_changed_listens_again_after_its_connection_was_lost(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as waiter, schemas.store(schema) as worker:
        assert await waiter.wait_changed(0.01) is False  # (listening)
        listening = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s"
        listen = f'LISTEN "flowtide_{schema}"%'
        # (On a busy machine the listening connection may not be made yet: wait until the
        # server shows it, so that the test ends that connection and not nothing.)
        seen = "SELECT pid FROM pg_stat_activity WHERE query LIKE %s"
        for _ in range(200):
            if await asyncio.to_thread(schemas.query, seen, schema, listen):
                break
            await waiter.wait_changed(0.05)
        started = time.monotonic()
        woke, terminated = await asyncio.gather(
            waiter.wait_changed(10), asyncio.to_thread(schemas.query, listening, schema, listen)
        )
        assert terminated == [(True,)], "the listening connection, found and ended"
        assert woke is True, "notices may have been lost: callers should look"
        assert time.monotonic() - started < 5
        # Listening again: no notice, no wake (given the time to connect on a busy machine: a
        # connection not made within the wait counts as notices maybe missed).
        assert await waiter.wait_changed(1.0) is False
        woke, _ = await asyncio.gather(
            waiter.wait_changed(10), worker.create_run(run_record("r"), {})
        )
        assert woke is True


# -- group commit ------------


def step(run_id: str, lease: Lease, n: int) -> Commit:
    """An engine's step: a token moved and two events, under the run's lease while it is live."""
    return Commit(
        run_id,
        tokens=[TokenRecord(f"{run_id}.1", run_id, f"p{n}", TokenStatus.RUNNING)],
        events=[EventRecord("a", run_id, at(n)), EventRecord("b", run_id, at(n))],
        lease=lease,
        run_lifecycles=frozenset({"pending", "running"}),
    )


async def held_runs(store: Store, count: int) -> list[Lease]:
    leases = [Lease(f"r{i:02}", "w", 1, at(60)) for i in range(count)]
    for lease in leases:
        await store.create_run(run_record(lease.run_id), {}, lease=lease)
    return leases


async def test_steps_that_come_while_one_is_in_flight_share_one_transaction(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as store:
        leases = await held_runs(store, 20)
        done = await asyncio.gather(*(store.commit(step(x.run_id, x, 1)) for x in leases))
        assert [[e.seq for e in events] for events in done] == [[1, 2]] * 20
        again = await asyncio.gather(*(store.commit(step(x.run_id, x, 2)) for x in leases))
        assert [[e.seq for e in events] for events in again] == [[3, 4]] * 20
        for lease in leases:
            assert [e.seq for e in await store.history(lease.run_id)] == [1, 2, 3, 4]
    # Of each 20, the first goes alone and those that came while it was in flight share the
    # next transaction: 4 transactions for the 40 steps, a few more if a busy machine let the
    # first one end before all the others had come (one step a transaction would make 40).
    rows = schemas.query("SELECT count(DISTINCT xmin::text) FROM {schema}.events", schema)
    assert 4 <= int(str(rows[0][0])) <= 8, rows


async def test_a_step_refused_in_a_group_is_refused_alone(schemas: Schemas) -> None:
    async with schemas.store() as store:
        leases = await held_runs(store, 6)
        lost = Lease("r03", "w", 2, at(60))
        await store.commit(Commit("r04", run=run_record("r04", "completed")))
        commits = [step(x.run_id, lost if x.run_id == "r03" else x, 1) for x in leases]
        done = await asyncio.gather(*(store.commit(c) for c in commits), return_exceptions=True)
        assert isinstance(done[3], LeaseLost), done[3]
        assert isinstance(done[4], StoreConflict) and "is completed" in str(done[4])
        for run_id, events in zip(["r00", "r01", "r02", "r05"], done[:3] + done[5:], strict=True):
            assert not isinstance(events, BaseException)
            assert [e.seq for e in events] == [1, 2]
            assert [e.seq for e in await store.history(run_id)] == [1, 2]
        assert await store.history("r03") == []
        assert await store.history("r04") == []


# -- many processes ------------

_CLAIMER = """
import asyncio, json, sys
from datetime import UTC, datetime
from flowtide.store.postgres import PostgresStore

async def main(url, schema, owner):
    now, expires = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    claimed = []
    async with PostgresStore(url, schema=schema, max_size=1) as store:
        while True:
            leases = await store.claim_runs(owner, now, expires, limit=3)
            if not leases:
                break
            claimed += [lease.run_id for lease in leases]
    print(json.dumps(claimed))

asyncio.run(main(*sys.argv[1:]))
"""


async def test_processes_claiming_from_one_schema_never_take_a_run_twice(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    made = [f"r{i:03d}" for i in range(120)]
    async with schemas.store(schema) as store:
        for run_id in made:
            await store.create_run(run_record(run_id), {})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SOURCE, os.environ.get("PYTHONPATH", "")])}
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CLAIMER,
            schemas.url,
            schema,
            f"process-{n}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        for n in range(4)
    ]
    claimed: dict[str, list[str]] = {}
    for n, process in enumerate(processes):
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        claimed[f"process-{n}"] = json.loads(out)
    every = [run_id for runs in claimed.values() for run_id in runs]
    assert sorted(every) == made, "each run claimed once, by one process"
    async with schemas.store(schema) as store:
        for owner, runs in claimed.items():
            for run_id in runs:
                lease = await store.lease_of(run_id)
                assert lease is not None and lease.owner == owner and lease.epoch == 1


async def test_requests_and_deadlines_are_judged_on_the_databases_clock(schemas: Schemas) -> None:
    async with schemas.store() as store:
        await store.create_run(run_record("r"), {"n": 1})
        before = datetime.now(UTC)
        given = before - timedelta(days=300)  # (a client whose clock is far behind)
        request = await store.request_signal(SignalRequest("q1", "r", given, {"placement": "p"}))
        assert before - timedelta(seconds=5) < request.requested_at < before + timedelta(seconds=5)
        assert await store.signal_request("q1") == request
        await store.commit(Commit("r", requests_answered=[RequestAnswer("q1", {}, before)]))
        ahead = datetime.now(UTC) + timedelta(seconds=30)  # (a worker whose clock is ahead)
        with pytest.raises(DeadlineAhead) as early:
            await store.commit(Commit("r", state={"n": 2}, fires_deadline=ahead))
        assert timedelta(seconds=25) < early.value.early_by <= timedelta(seconds=30)
        assert (await store.get_state("r"))["n"] == 1
        await store.commit(Commit("r", state={"n": 3}, fires_deadline=before))
        assert (await store.get_state("r"))["n"] == 3


async def test_a_deadline_fires_in_one_round_trip(schemas: Schemas) -> None:
    """A commit firing a deadline is judged on the database's clock without being read first:
    one round trip, as any step; refused, it is still told why."""
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=1)
        async with store:
            passed = datetime.now(UTC) - timedelta(seconds=1)
            # (Another run's deadline fired first: the statement is prepared on the connection
            # at its first use, a round trip of its own, once; counted is every later use.)
            for run_id in ("warm", "r"):
                lease = Lease(run_id, "w", 1, at(86400))
                entry = DueEntry(passed, run_id, f"{run_id}.1", "timeout")
                parked = TokenRecord(f"{run_id}.1", run_id, "p", P, deadline=passed)
                first = Commit(run_id, tokens=[parked], due=[entry], lease=lease)
                await store.create_run(run_record(run_id, "parked"), {"n": 1}, first, lease=lease)
                timed_out = TokenRecord(
                    f"{run_id}.1", run_id, "p", TokenStatus.DONE, deadline=passed
                )
                fired = EventRecord("node_timed_out", run_id, passed, "p", 1, f"{run_id}.1")
                before, sent = wire.count, len(wire.sent)
                events = await store.commit(
                    Commit(
                        run_id,
                        state={"n": 2},
                        tokens=[timed_out],
                        events=[fired],
                        expect={f"{run_id}.1": P},
                        due_fired=[entry],
                        fires_deadline=passed,
                        lease=lease,
                        run_lifecycles=frozenset({"parked"}),
                    )
                )
            assert wire.count - before == 1, "".join(wire.sent[sent:])
            assert [e.seq for e in events] == [1]
            assert (await store.get_state("r"))["n"] == 2
            assert await store.due_of("r") == []
            ahead = datetime.now(UTC) + timedelta(seconds=30)
            with pytest.raises(DeadlineAhead):
                await store.commit(Commit("r", state={"n": 3}, fires_deadline=ahead, lease=lease))
            assert (await store.get_state("r"))["n"] == 2


async def test_a_commit_takes_the_lease_in_the_statement_that_advances_its_run(
    schemas: Schemas,
) -> None:
    """A signal's wake takes its run's lease in its commit: sent whole, the lease is taken and
    checked by the one statement that locks the run, advances its counter and writes the commit."""
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=1)
        async with store:
            # (Another run woken first: the statement is prepared on the connection at its first
            # use, a round trip of its own, once; counted is every later use.)
            for run_id in ("warm", "r"):
                await store.create_run(run_record(run_id, "parked"), {"n": 1})
                mine = Lease(run_id, "w", 1, datetime.now(UTC) + timedelta(seconds=30))
                woken = TokenRecord(f"{run_id}.1", run_id, "p", TokenStatus.RUNNING)
                sent = len(wire.sent)
                before = wire.count
                await store.commit(
                    Commit(
                        run_id,
                        tokens=[woken],
                        events=[EventRecord("signalled", run_id, T0, "p")],
                        take=LeaseTake(mine, datetime.now(UTC)),
                        run_lifecycles=frozenset({"parked"}),
                    )
                )
            statements = wire.sent[sent:].count("B")
            assert wire.count - before == 1
            # One statement, a transaction of its own: the run advanced with its lease taken,
            # the token, the event, the run's wake instant brought up to date.
            assert statements == 1, wire.sent[sent:]
            held = await store.lease_of("r")
            assert held is not None and (held.owner, held.epoch) == ("w", 1)
            theirs = LeaseTake(Lease("r", "x", 1, mine.expires), datetime.now(UTC))
            with pytest.raises(LeaseLost):
                await store.commit(Commit("r", state={"n": 2}, take=theirs))
            assert await store.lease_of("r") == held
            assert await store.get_state("r") == {"n": 1}


async def test_two_workers_taking_one_lease_at_once_one_wins_and_only_its_commit_applies(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as one, schemas.store(schema) as other:
        for round_ in range(30):
            run_id = f"r{round_}"
            await one.create_run(run_record(run_id, "parked"), {"by": None})

            async def take(store: Store, owner: str, run_id: str = run_id) -> str | None:
                now = datetime.now(UTC)
                take = LeaseTake(Lease(run_id, owner, 1, now + timedelta(seconds=30)), now)
                try:
                    await store.commit(Commit(run_id, state={"by": owner}, take=take))
                except LeaseLost:
                    return None
                return owner

            won = [w for w in await asyncio.gather(take(one, "a"), take(other, "b")) if w]
            assert len(won) == 1, won
            held = await one.lease_of(run_id)
            assert held is not None and (held.owner, held.epoch) == (won[0], 1)
            assert await other.get_state(run_id) == {"by": won[0]}


async def test_on_given_instants_a_request_is_recorded_no_earlier_than_a_fired_deadline(
    schemas: Schemas,
) -> None:
    """As on SQLite: a store told to judge by the instants given (an engine on a virtual
    clock) records a request no earlier than the latest deadline its run fired."""
    async with schemas.store() as store:
        store.own_clock = False
        await store.create_run(run_record("r", "parked"), {"n": 1})
        await store.commit(Commit("r", state={"n": 2}, fires_deadline=at(100)))
        late = await store.request_signal(SignalRequest("q1", "r", at(50), {"placement": "p"}))
        assert late.requested_at == at(100)
        assert await store.signal_request("q1") == late
        assert [(e.when, e.purpose) for e in await store.due_of("r")] == [(at(50), "signal")]


SKEW = timedelta(seconds=60)
TERM = timedelta(seconds=30)


def _near(got: datetime, want: datetime, what: str) -> None:
    assert abs(got - want) < timedelta(seconds=5), f"{what}: {got} is not near {want}"


async def test_no_machines_clock_takes_a_run_whose_lease_the_database_says_is_alive(
    schemas: Schemas,
) -> None:
    """Leases are judged on the database's clock: a claim or an acquire whose ``now`` runs a
    minute ahead takes no live run, and every lease runs for the term asked from the
    database's clock, whatever the caller's clock says."""
    async with schemas.store() as store:
        real = datetime.now(UTC)
        created = RunRecord("r", "urn:flowtide:test", "1", "running", real - SKEW)
        # (Created by a machine whose clock runs a minute behind: held from the database's
        # clock for the term asked, not expired at once.)
        await store.create_run(created, {}, lease=Lease("r", "w1", 1, real - SKEW + TERM))
        _near((await store.lease_of("r")).expires, real + TERM, "a lease made behind")  # type: ignore[union-attr]
        await store.create_run(run_record("free"), {})
        ahead = datetime.now(UTC) + SKEW
        taken = await store.claim_runs("w2", ahead, ahead + TERM)
        assert [lease.run_id for lease in taken] == ["free"]
        _near(taken[0].expires, datetime.now(UTC) + TERM, "a lease claimed ahead")
        assert await store.acquire_run("r", "w2", ahead, ahead + TERM) is None
        behind = datetime.now(UTC) - SKEW
        (renewed,) = await store.renew_leases("w1", behind + TERM, now=behind)
        _near(renewed.expires, datetime.now(UTC) + TERM, "a lease renewed behind")
        assert await store.claim_runs("w3", ahead + 2 * TERM, ahead + 3 * TERM) == []
        forced = await store.acquire_run("r", "w2", ahead, ahead + TERM, force=True)
        assert forced is not None and forced.owner == "w2"


async def test_a_due_entry_is_claimed_when_the_databases_clock_reaches_it(
    schemas: Schemas,
) -> None:
    async with schemas.store() as store:
        await store.create_run(run_record("r", "parked"), {})
        soon = datetime.now(UTC) + timedelta(seconds=1)
        token = TokenRecord("r.1", "r", "p", P)
        await store.commit(Commit("r", tokens=[token], due=[DueEntry(soon, "r", "r.1", "t")]))
        ahead = datetime.now(UTC) + SKEW
        assert await store.claim_runs("w1", ahead, ahead + TERM) == []  # (not yet, it says)
        behind = datetime.now(UTC) - SKEW
        for _ in range(100):
            if taken := await store.claim_runs("w1", behind, behind + TERM):
                break
            await asyncio.sleep(0.05)
        assert [lease.run_id for lease in taken] == ["r"]
        assert datetime.now(UTC) >= soon
