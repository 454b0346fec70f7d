"""A run's snapshot on PostgreSQL: one statement, one round trip, and every value read back as
the reads of each part give it (its rows travel as JSON); the snapshots asked for while one is
read are read together."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    Lease,
    NodeAnchor,
    ParkRecord,
    RunRecord,
    Store,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)
from flowtide.store.postgres import PostgresStore
from tests.postgres_schemas import Schemas
from tests.store.wire import RoundTrips

T0 = datetime(2026, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)
ODD: dict[str, object] = {
    "surrogate": "a\udc80b",
    "words": 'naïve ☃ \u2028 "quoted" \\ end',
    "numbers": [1.0, 1e300, -0.0, 12345678901234567890, 0.1],
    "nested": {"z": 1, "a": [None, True, {"": ""}]},
    "empty": {},
}
"""State values whose JSON text a round trip through other JSON could change."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id,
        "urn:test:flow",
        "1",
        "running",
        T0,
        deadline=at(3600.000001),
        started_at=at(0.5),
        parent_run_id="parent",
        parent_token_id="parent.1",
        depth=2,
        result={"r": "é"},
        options={"entrypoint": None, "x": [1, 2]},
    )


async def seeded(store: Store, run_id: str) -> Lease:
    await store.create_run(record(run_id), ODD)
    lease = await store.acquire_run(run_id, "w", at(1), at(31))
    assert lease is not None
    token = TokenRecord(
        f"{run_id}.1",
        run_id,
        "p",
        TokenStatus.PARKED,
        attempt=2,
        visit=3,
        deadline=at(90.25),
        due=at(80),
        created_at=at(0.000001),
        data={"d": ODD["words"]},
        epoch=4,
    )
    await store.commit(
        Commit(
            run_id,
            tokens=[token, TokenRecord(f"{run_id}.2", run_id, "q", TokenStatus.READY)],
            events=[EventRecord("seeded", run_id, at(2.5), "p", 2, f"{run_id}.1", {"e": 1})],
            due=[
                DueEntry(at(60), run_id, f"{run_id}.1", "timeout"),
                DueEntry(at(50), run_id, f"{run_id}.2"),
            ],
            anchors=[
                NodeAnchor(run_id, "kept", None, at(3)),
                NodeAnchor(run_id, "kept", "item ☃", at(4)),
            ],
            parks=[
                ParkRecord(
                    f"{run_id}.1#1",
                    run_id,
                    f"{run_id}.1",
                    "p",
                    3,
                    1,
                    at(5),
                    deadline=at(90.25),
                    key="k",
                    payload={"p": ODD["surrogate"]},
                )
            ],
            lease=lease,
        )
    )
    return lease


async def test_a_snapshot_is_one_statement_in_one_round_trip(schemas: Schemas) -> None:
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=1)
        async with store:
            await seeded(store, "r")
            # (Another run read first: the statement is prepared on the connection at its first
            # use, a round trip of its own, once; counted is every later read.)
            await seeded(store, "warm")
            await store.load_run("warm")
            before, sent = wire.count, len(wire.sent)
            snapshot = await store.load_run("r")
            messages = Counter(wire.sent[sent:])
    assert snapshot.run.id == "r" and len(snapshot.tokens) == 2
    assert wire.count - before == 1, wire.sent[sent:]
    assert messages["B"] == 1, wire.sent[sent:]  # (one statement bound: no BEGIN, no COMMIT)


async def test_a_snapshot_reads_every_value_as_the_reads_of_each_part(schemas: Schemas) -> None:
    async with schemas.store() as store:
        lease = await seeded(store, "r")
        await seeded(store, "s")  # (another run's rows are not this one's)
        got = await store.load_run("r")
        assert got.run == await store.get_run("r")
        assert got.state == await store.get_state("r") == ODD
        assert list(got.tokens) == list(await store.tokens("r"))
        assert list(got.history) == list(await store.history("r"))
        assert list(got.parks) == list(await store.parks(run_id="r", open_only=True))
        assert list(got.anchors) == list(await store.node_anchors("r"))
        assert list(got.due) == list(await store.due_of("r"))
        assert [d.token_id for d in got.due] == ["r.2", "r.1"]  # (earliest first)
        assert got.lease == await store.lease_of("r") and got.lease is not None
        assert (got.lease.owner, got.lease.epoch, got.epoch) == ("w", lease.epoch, lease.epoch)
        # Instants keep their microseconds and their zone.
        assert got.run.deadline == at(3600.000001) and got.tokens[0].created_at == at(0.000001)
        assert all(e.at.tzinfo is not None for e in got.history)


async def test_snapshots_asked_for_while_one_is_read_are_read_together(schemas: Schemas) -> None:
    async with RoundTrips(schemas.url) as wire:
        store = PostgresStore(wire.url, schema=schemas.new(), min_size=1, max_size=4)
        async with store:
            ids = [f"r{i}" for i in range(8)]
            for run_id in ids:
                await seeded(store, run_id)
            alone = {run_id: await store.load_run(run_id) for run_id in ids}
            sent = len(wire.sent)
            asked = [*ids, "nobody", ids[0]]
            got = await asyncio.gather(
                *(store.load_run(run_id) for run_id in asked), return_exceptions=True
            )
            statements = wire.sent[sent:].count("B")
    # The first alone, the nine that came while it was read in one statement.
    assert statements == 2, wire.sent[sent:]
    assert got[: len(ids)] == [alone[run_id] for run_id in ids]
    assert isinstance(got[len(ids)], UnknownRunError)
    assert got[-1] == alone[ids[0]]
