"""The PostgreSQL store's statements: read once from ``queries.sql``, by name (:data:`Q`), and
the few that name the store's schema or its notification channel, made with the identifier
quoted (:func:`with_schema`, :func:`with_channel`)."""

from __future__ import annotations

import hashlib
from typing import Final

from psycopg import sql

from flowtide.store.sqlfiles import load_queries

__all__ = [
    "OWN_QUERIES",
    "Q",
    "advisory_key",
    "channel_name",
    "check_schema_name",
    "with_channel",
    "with_schema",
]

Q: Final[dict[str, str]] = load_queries("flowtide.store.postgres", "queries.sql")
"""Statement text by name."""

OWN_QUERIES: Final = frozenset(
    {
        "set_search_path",
        "set_time_zone",
        "set_plan_cache_mode",
        "set_channel",
        "create_schema",
        "lock_schema",
        "listen",
        "clock_now",
        "begin",
        "commit",
        "commit_whole",
        "create_whole",
        *(name for name in Q if name.startswith("whole_")),
        "begin_snapshot",
        "load_runs_whole",
    }
)
"""The statements only PostgreSQL has (every other name is SQLite's too, for the same job): its
schema and connections' settings, notices, its clock, explicit transactions (connections are
in autocommit mode), a commit (or a new run) sent whole in one statement (``commit_whole``,
``create_whole`` and the parts they are made of, ``whole_*``), a read-only snapshot's
transaction, and runs' snapshots read in one statement."""

_NAME_BYTES = 63
"""PostgreSQL's longest identifier (a longer one would be cut short, silently)."""


def with_schema(name: str, schema: str) -> sql.Composed:
    """Statement ``name`` with ``{schema}`` as the quoted identifier ``schema``."""
    return sql.SQL(Q[name]).format(schema=sql.Identifier(schema))


def with_channel(name: str, channel: str) -> sql.Composed:
    """Statement ``name`` with ``{channel}`` as the quoted identifier ``channel``."""
    return sql.SQL(Q[name]).format(channel=sql.Identifier(channel))


def check_schema_name(schema: str) -> None:
    """Refuse a schema name PostgreSQL would not keep as it is (empty, or too long)."""
    if not schema or len(schema.encode()) > _NAME_BYTES or "\x00" in schema:
        raise ValueError(
            f"a PostgreSQL schema name has 1 to {_NAME_BYTES} bytes and no NUL: {schema!r}"
        )


def channel_name(schema: str) -> str:
    """The notification channel of the store in ``schema``: ``flowtide_<schema>``, or a name
    made from a digest of the schema name when that would be too long for an identifier."""
    name = f"flowtide_{schema}"
    if len(name.encode()) <= _NAME_BYTES:
        return name
    return "flowtide_" + hashlib.sha256(schema.encode()).hexdigest()[:40]


def advisory_key(schema: str) -> int:
    """The advisory lock key that serialises the migrations of ``schema`` (a signed 64-bit
    number taken from a digest of its name)."""
    digest = hashlib.sha256(f"flowtide.migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
