"""A database that stops answering, said once: one line when it stops, one when it answers
again.

While PostgreSQL is down every look for work, every lease renewal and every heartbeat fails,
and psycopg's pool warns of each connection it cannot make or has to drop (several lines each):
hundreds of lines for a minute's outage, which bury what the log is for. The store's failures
that mean "not reachable now" (:class:`~flowtide.store.base.StoreDown`) are told here instead,
at the first and when a statement succeeds again; the pool's own warnings about this store's
pool and connections are kept out of the log (its errors are not).
"""

from __future__ import annotations

import logging
import time
import weakref

import psycopg
from psycopg_pool import PoolTimeout

__all__ = ["POOL_PREFIX", "Outage", "is_down", "quiet_pool_warnings"]

log = logging.getLogger("flowtide.store")

POOL_PREFIX = "flowtide:"
"""How the store's pools are named (``flowtide:<schema>``)."""

_CONNECTION_LOST = "08"
"""SQLSTATE class of connection exceptions."""
_NOT_NOW = frozenset({"57P01", "57P02", "57P03", "53300"})
"""The server shut down (by an administrator, or in a crash), cannot take connections yet, or
has none left (``too_many_connections``: other clients hold them all, for now)."""

_connections: weakref.WeakSet[object] = weakref.WeakSet()
"""Every connection of a store's pool (the pool's warnings about them are not logged)."""


def is_down(error: psycopg.Error) -> bool:
    """Whether ``error`` means the database cannot be reached now (it may be, later): a
    connection that could not be made or was lost, a server shutting down or out of
    connections, no connection in time. (A refused statement, a conflict or bad data is
    not.)"""
    if isinstance(error, PoolTimeout | psycopg.InterfaceError):
        return True
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    return state is None or state.startswith(_CONNECTION_LOST) or state in _NOT_NOW


def quiet_pool_warnings(connection: object) -> None:
    """Keep psycopg's pool warnings about ``connection`` (one of a store's pools) out of the
    log; the filter is installed once."""
    _connections.add(connection)
    pool_log = logging.getLogger("psycopg.pool")
    if not any(isinstance(f, _PoolWarnings) for f in pool_log.filters):
        pool_log.addFilter(_PoolWarnings())


class _PoolWarnings(logging.Filter):
    """Drops the pool's warnings (and lesser records) that name a store's pool or connection."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING or not isinstance(record.args, tuple):
            return True
        return not any(_ours(arg) for arg in record.args)


def _ours(arg: object) -> bool:
    if isinstance(arg, str):
        return arg.startswith(POOL_PREFIX)
    try:
        return arg in _connections
    except TypeError:  # (not hashable: not a connection)
        return False


class Outage:
    """Whether the database of ``name`` answers, told once each way."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._since: float | None = None
        """When (monotonic seconds) the database stopped answering, while it does not."""

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, reason: str) -> None:
        """A statement failed because the database cannot be reached (``reason``: why)."""
        if self._since is None:
            self._since = time.monotonic()
            log.warning("the database does not answer (%s); trying again until it does", reason)

    def answered(self) -> None:
        """A statement succeeded."""
        if self._since is not None:
            lasted = time.monotonic() - self._since
            self._since = None
            log.warning("PostgreSQL database %s answers again (after %.1f s)", self._name, lasted)
