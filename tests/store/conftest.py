"""Fixtures of the PostgreSQL store's tests: fresh stores, each on a schema of its own (the
server and the schemas come from the fixtures of ``tests/conftest.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from flowtide.store import Store
from flowtide.testing import StoreFactory
from tests.postgres_schemas import Schemas


@pytest.fixture
def postgres_stores(schemas: Schemas) -> StoreFactory:
    """Gives a fresh, open store on a schema of its own, closed on exit (its schema is dropped
    when the test ends)."""

    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Store]:
        async with schemas.store(max_size=4) as store:
            yield store

    return fresh
