"""What a PostgreSQL failure is called in Flowtide's terms, and how a database is named in a
message: by host, port, database and user, never with its password.

psycopg's errors are never let out of the store: each becomes a
:class:`~flowtide.store.base.StoreError` (or one of its kinds) whose text Flowtide writes, with
any password scrubbed from what it quotes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolClosed, PoolTimeout

from flowtide.store.base import (
    DuplicateSignal,
    StoreDataError,
    StoreDown,
    StoreError,
    StoreNotReady,
    StoreOpenError,
)
from flowtide.store.postgres.outage import is_down

__all__ = ["Target", "open_error", "store_error", "unencodable"]

_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "no route to host",
    "network is unreachable",
    "timeout expired",
    "timed out",
    "temporary failure in name resolution",
    "no such file or directory",  # (a local socket: the server has not made it yet)
)
"""What libpq says of a server that is not there now (down, or not up yet)."""
_NOT_NOW = (
    "too many clients",
    "too many connections",
    "remaining connection slots are reserved",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
)
"""What a server says when it cannot take a connection now (SQLSTATE 53300, 57P03, ...)."""
_UNKNOWN_HOST = (
    "failed to resolve host",
    "could not translate host name",
    "name or service not known",
)
_REFUSED_CREDENTIALS = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
)


_DATA_ERRORS = (
    psycopg.DataError,  # (class 22: a NUL in text, a value out of range, ...)
    pg_errors.ProgramLimitExceeded,  # (an index row too large: a key too long)
    pg_errors.CheckViolation,
    pg_errors.NotNullViolation,
)
"""What PostgreSQL says when the data is at fault (the same write fails again)."""


@dataclass(frozen=True, slots=True)
class Target:
    """The database a connection string points at, fit to be shown: ``name`` says
    ``user@host:port/database`` (whatever of these the string gives), never the password."""

    name: str
    password: str | None = field(repr=False)
    """Kept only to be masked in the text of errors that might quote it."""
    readable: bool = True
    """False: the string could not be read (``name`` then says only that)."""

    @classmethod
    def of(cls, url: str) -> Target:
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error:
            return cls("(a connection string that cannot be read)", None, readable=False)
        password = params.get("password")
        user, host, port, dbname = (params.get(key) for key in ("user", "host", "port", "dbname"))
        where = str(host or "(local socket)")
        if port:
            where += f":{port}"
        name = f"{user}@{where}" if user else where
        if dbname:
            name += f"/{dbname}"
        return cls(f"'{name}'", str(password) if password else None)

    def scrub(self, text: str) -> str:
        """``text`` on one line, with the password (if it shows) masked."""
        line = " ".join(text.split())
        if self.password:
            line = line.replace(self.password, "***")
        return line


def open_error(error: psycopg.Error, target: Target) -> StoreOpenError:
    """The :class:`StoreOpenError` of a connection that could not be opened: one line naming
    the database and why, in Flowtide's words where the reason is a usual one. A server that
    is down, still starting or out of connections gives :class:`StoreNotReady` (it may open
    later); a wrong address, refused credentials or an unknown database do not."""
    text = str(error).lower()
    scrubbed = target.scrub(str(error).removeprefix("connection failed: "))
    if "database" in text and "does not exist" in text:
        reason = "the database does not exist"
    elif any(words in text for words in _REFUSED_CREDENTIALS) or (
        "role" in text and "does not exist" in text
    ):
        reason = "the server refused these credentials"
    elif any(words in text for words in _NOT_NOW):
        return StoreNotReady(f"cannot open the PostgreSQL database {target.name} now: {scrubbed}")
    elif isinstance(error, PoolTimeout) or any(words in text for words in _UNREACHABLE):
        return StoreNotReady(
            f"cannot open the PostgreSQL database {target.name}: "
            "the server cannot be reached (is PostgreSQL running there?)"
        )
    elif any(words in text for words in _UNKNOWN_HOST):
        reason = "its host name is not known"
    else:
        reason = scrubbed
    return StoreOpenError(f"cannot open the PostgreSQL database {target.name}: {reason}")


def store_error(error: psycopg.Error, target: Target) -> StoreError:
    """The :class:`StoreError` a psycopg error stands for."""
    if isinstance(error, pg_errors.UniqueViolation):
        constraint = error.diag.constraint_name
        if constraint == "signal_answers_pkey":
            detail = target.scrub(error.diag.message_detail or "")
            return DuplicateSignal(
                f"a signal idempotency key was answered by a racing commit: {detail}"
            )
        if constraint == "runs_pkey":
            detail = target.scrub(error.diag.message_detail or "")
            return StoreError(f"a run with this id exists already: {detail}")
    if isinstance(error, _DATA_ERRORS):
        state = f" [{error.sqlstate}]" if error.sqlstate else ""
        detail = target.scrub(str(error)) or type(error).__name__
        return StoreDataError(f"PostgreSQL database {target.name} refused a value{state}: {detail}")
    if isinstance(error, PoolClosed):
        return StoreError(f"the PostgreSQL store of {target.name} is closed")
    if isinstance(error, PoolTimeout):
        return StoreDown(f"no connection to the PostgreSQL database {target.name} in time")
    state = f" [{error.sqlstate}]" if error.sqlstate else ""
    detail = target.scrub(str(error)) or type(error).__name__
    kind = StoreDown if is_down(error) else StoreError
    return kind(f"PostgreSQL database {target.name}{state}: {detail}")


def unencodable(error: UnicodeEncodeError) -> StoreError:
    """The :class:`StoreError` of a name (a run id, a key) that UTF-8 cannot write (a lone
    surrogate): PostgreSQL's text cannot hold it."""
    return StoreDataError(f"PostgreSQL text cannot hold {error.object[error.start : error.end]!r}")
