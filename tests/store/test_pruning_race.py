"""Prunes at once, on one database (as processes would be): every run that may go is pruned
exactly once between them, none stops while runs are left, and their counts add up, on SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from flowtide.cli.prune import prune_all
from flowtide.store import Commit, EventRecord, SQLiteStore, Store
from flowtide.testing.storechecks.support import T0, at, run_record
from tests.postgres_schemas import Schemas

RUNS = 60
ROUNDS = 10


async def fill(store: Store, round_: int) -> None:
    for n in range(RUNS):
        run_id = f"{round_}-{n:03d}"
        ended = replace(run_record(run_id, "completed"), finished_at=at(1))
        await store.create_run(ended, {"n": n})
        await store.commit(Commit(run_id, events=[EventRecord("done", run_id, T0)]))
    await store.create_run(run_record(f"{round_}-live"), {})


PRUNES = 4


async def race(make: Callable[[], Store]) -> None:
    stores = [make() for _ in range(PRUNES)]
    try:
        for round_ in range(ROUNDS):
            await fill(stores[0], round_)
            counts = await asyncio.gather(
                *(prune_all(store, at(5), 4, dry_run=False) for store in stores)
            )
            assert sum(counts) == RUNS, counts
            assert list(await stores[-1].run_ids(f"{round_}-")) == [f"{round_}-live"]
    finally:
        for store in stores:
            await store.close()


async def test_prunes_at_once_on_sqlite(tmp_path: Path) -> None:
    await race(lambda: SQLiteStore(tmp_path / "runs.db"))


@pytest.mark.usefixtures("postgres_url")
async def test_prunes_at_once_on_postgresql(schemas: Schemas) -> None:
    schema = schemas.new()
    await race(lambda: schemas.store(schema, max_size=2))
