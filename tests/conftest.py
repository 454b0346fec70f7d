"""Run ``async def`` tests with ``asyncio.run`` (no plugin needed), each bounded to 20 s; and
the PostgreSQL test server, with fresh schemas in it.

Every async test runs on a fresh event loop; timing decisions inside use a virtual clock, so the
bound is a safety net against a hang, never a timing assertion.

The PostgreSQL server is the one ``FLOWTIDE_TEST_POSTGRES_URL`` names (by default the local one,
user ``postgres``, database ``test``). Each store a test makes gets a schema of its own,
``flowtide_test_<hex>``, dropped with everything in it when the test ends: tests never meet,
whatever runs beside them. When the server cannot be reached, these tests fail (never skip),
saying how to start it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import settings

from tests.postgres_schemas import Schemas

# Property tests check what happens, not how fast: no per-example deadline on a busy CI machine.
settings.register_profile("flowtide", deadline=None)
settings.load_profile("flowtide")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args: dict[str, Any] = {
        name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames
    }

    async def bounded() -> None:
        await asyncio.wait_for(pyfuncitem.obj(**args), 20)

    asyncio.run(bounded())
    return True


DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

HOW_TO_START = (
    "start the local server with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) "
    "main start`, or name a server of yours in FLOWTIDE_TEST_POSTGRES_URL"
)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The URL of the test server, once it has answered."""
    url = os.environ.get("FLOWTIDE_TEST_POSTGRES_URL", DEFAULT_URL)
    try:
        with psycopg.connect(url, connect_timeout=5) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        pytest.fail(
            f"the PostgreSQL store's tests need a server: {first_line}\n{HOW_TO_START}",
            pytrace=False,
        )
    return url


@pytest.fixture
def schemas(postgres_url: str) -> Iterator[Schemas]:
    made = Schemas(postgres_url)
    yield made
    made.drop_all()
