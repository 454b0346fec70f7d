"""The ``every_store`` fixture: a test module that uses it runs each of its tests on the memory,
SQLite and PostgreSQL stores (each test on a fresh one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtide.store import MemoryStore, Store
from flowtide.store.sqlite import SQLiteStore
from tests.engine import engine_helpers
from tests.postgres_schemas import Schemas


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def every_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind: str = request.param
    files = iter(range(1_000_000))

    def sqlite() -> Store:
        return SQLiteStore(tmp_path / f"runs-{next(files)}.db", synchronous="NORMAL")

    maker: engine_helpers.StoreMaker
    if kind == "memory":
        maker = MemoryStore
    elif kind == "sqlite":
        maker = sqlite
    else:
        schemas: Schemas = request.getfixturevalue("schemas")

        def postgres() -> Store:
            return schemas.store(max_size=4)

        maker = postgres
    engine_helpers.store_kind[:] = [maker]
    try:
        yield kind
    finally:
        engine_helpers.store_kind.clear()
