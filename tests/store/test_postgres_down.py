"""Which PostgreSQL failures mean "not reachable now" (a :class:`~flowtide.store.StoreDown`,
tried again by whoever asked), whether they come on a pooled connection or a direct one."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from flowtide.store import StoreDown
from flowtide.store.postgres.errors import Target, store_error
from flowtide.store.postgres.outage import is_down

TARGET = Target.of("postgresql://flowtide:secret@db.example:5432/runs")


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.TooManyConnections("sorry, too many clients already"),
        pg_errors.AdminShutdown("terminating connection due to administrator command"),
        pg_errors.CannotConnectNow("the database system is starting up"),
        psycopg.OperationalError("connection failed: FATAL: sorry, too many clients already"),
        PoolTimeout("couldn't get a connection after 30.00 sec"),
    ],
    ids=["too-many-clients", "shutdown", "starting-up", "connection-failed", "pool-timeout"],
)
def test_a_database_out_of_reach_or_of_connections_is_down(error: psycopg.Error) -> None:
    assert is_down(error)
    assert isinstance(store_error(error, TARGET), StoreDown)


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.UniqueViolation("duplicate key"),
        pg_errors.SyntaxError("syntax error"),
        pg_errors.DiskFull("could not extend file"),
    ],
    ids=["conflict", "refused-statement", "disk-full"],
)
def test_a_refused_statement_is_not_down(error: psycopg.Error) -> None:
    assert not is_down(error)
    assert not isinstance(store_error(error, TARGET), StoreDown)
