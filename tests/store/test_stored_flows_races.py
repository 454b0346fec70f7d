"""Registrations that race: many store objects (as many processes) storing one document at once
find it new exactly once, and documents of one id stored at once each get a place of their own,
the last of them the latest. On a SQLite file and a PostgreSQL schema, many times."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

from flowtide.store import Store, StoredFlow
from flowtide.store.sqlite import SQLiteStore
from flowtide.testing.storechecks.support import at
from tests.postgres_schemas import Schemas

ROUNDS, RACERS = 20, 6


def document(flow_id: str, version: str) -> StoredFlow:
    digest = hashlib.sha256(f"{flow_id} {version}".encode()).hexdigest()
    return StoredFlow(flow_id, version, digest, {"id": flow_id, "version": version})


async def race(stores: Sequence[Store]) -> None:
    for n in range(ROUNDS):
        same = document(f"urn:race:{n}", "1")
        news = await asyncio.gather(*(s.put_flow(same, stored_at=at(n)) for s in stores))
        assert sorted(news) == [False] * (len(stores) - 1) + [True], n
        others = [document(f"urn:race:{n}", f"v{k}") for k in range(len(stores))]
        await asyncio.gather(
            *(s.put_flow(d, stored_at=at(n)) for s, d in zip(stores, others, strict=True))
        )
        versions = await stores[0].flow_versions(f"urn:race:{n}")
        assert len({v.digest for v in versions}) == len(stores) + 1
        assert [v.latest for v in versions] == [False] * len(stores) + [True]
        assert (await stores[-1].latest_flow(f"urn:race:{n}")).digest == versions[-1].digest


async def test_registrations_race_on_a_sqlite_file(tmp_path: Path) -> None:
    stores = [SQLiteStore(tmp_path / "runs.db") for _ in range(RACERS)]
    for store in stores:
        await store.open()
    try:
        await race(stores)
    finally:
        for store in stores:
            await store.close()


async def test_registrations_race_on_postgres(schemas: Schemas) -> None:
    schema = schemas.new()
    stores = [schemas.store(schema, max_size=2) for _ in range(RACERS)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        await race(stores)
    finally:
        for store in stores:
            await store.close()
