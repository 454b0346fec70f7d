"""Stores named by URL: ``sqlite:///path/runs.db`` (or a plain path), ``postgresql://...`` (with
``?schema=NAME`` for a schema other than ``flowtide``) or a libpq connection string
(``host=db1 dbname=runs user=app``), ``memory:``; and URLs as they may be shown (never with
their password)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from flowtide.store.base import Store, StoreOpenError
from flowtide.store.memory import MemoryStore

__all__ = ["DEFAULT_STORE", "a_store", "is_conninfo", "open_store", "redact", "store_for"]

DEFAULT_STORE = "sqlite:///flowtide.db"
"""The store a command uses without ``--store`` or ``FLOWTIDE_STORE``: a SQLite file in the
current directory."""

_SECRET = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s]*)")
"""A password in a URL's query or a connection string, quoted or not."""
_CONNINFO = re.compile(r"^\s*[A-Za-z_]+\s*=")
"""How a libpq connection string starts: ``keyword=``."""


def is_conninfo(url: str) -> bool:
    """Whether ``url`` is a libpq connection string (``host=... dbname=...``), not a path."""
    return "://" not in url and _CONNINFO.match(url) is not None


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in its user part or its query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _SECRET.sub(r"\1***", url)
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        hidden = f"{user.split(':', 1)[0]}:***@{host}"
        url = urlunsplit((parts.scheme, hidden, parts.path, parts.query, parts.fragment))
    return _SECRET.sub(r"\1***", url)


def store_for(url: str) -> Store:
    """The store ``url`` names, not opened yet (raises :class:`StoreOpenError` for a URL that
    names no store Flowtide has)."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if is_conninfo(url):
        return _postgres(url, *_conninfo_schema(url))
    if scheme in ("postgresql", "postgres"):
        return _postgres(url, *_without_schema(url))
    if scheme == "sqlite":
        rest = url[len("sqlite://") :]
        # sqlite:///runs.db is relative, sqlite:////srv/runs.db absolute (as SQLAlchemy reads them)
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise StoreOpenError(f"{redact(url)} names no file (sqlite:///path/runs.db)")
    elif scheme:
        raise StoreOpenError(
            f"{redact(url)}: unknown kind of store {scheme!r} "
            "(use sqlite:///path/runs.db, postgresql://user@host/db or memory:)"
        )
    else:
        path = url
    from flowtide.store.sqlite import SQLiteStore

    return SQLiteStore(Path(path))


def _postgres(url: str, conninfo: str, schema: str | None) -> Store:
    try:
        from psycopg import Error as DriverError
        from psycopg.conninfo import conninfo_to_dict

        from flowtide.store.postgres import PostgresStore
    except ImportError as exc:
        raise StoreOpenError(
            f"cannot open {redact(url)}: the PostgreSQL store needs psycopg "
            "(pip install 'flowtide[postgres]')"
        ) from exc
    try:
        if is_conninfo(url):  # (a URL is read, and refused if it must be, on open)
            conninfo_to_dict(conninfo)
    except DriverError as exc:
        reason = " ".join(redact(str(exc)).split())
        raise StoreOpenError(
            f"cannot open {redact(url)}: not a PostgreSQL connection string ({reason}); a "
            "SQLite file whose name holds '=' is named sqlite:///path"
        ) from None
    return PostgresStore(conninfo, schema=schema) if schema else PostgresStore(conninfo)


_SCHEMA = re.compile(r"(?:^|\s)schema\s*=\s*([^\s']+)")


def _conninfo_schema(conninfo: str) -> tuple[str, str | None]:
    """A connection string without its ``schema=NAME`` (Flowtide's, not libpq's), and the
    schema it names, if any: ``host=db1 dbname=runs schema=shop_runs``."""
    found = list(_SCHEMA.finditer(conninfo))
    if not found:
        return conninfo, None
    return _SCHEMA.sub(" ", conninfo).strip(), found[-1][1]


def _without_schema(url: str) -> tuple[str, str | None]:
    """``url`` without its ``schema`` query parameter (Flowtide's, not the driver's), and the
    schema it names, if any: ``postgresql://host/db?schema=shop_runs``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in query if name == "schema"]
    if not schemas:
        return url, None
    kept = urlencode([(name, value) for name, value in query if name != "schema"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, kept, parts.fragment)), schemas[-1]


async def open_store(url: str) -> Store:
    """The store ``url`` names, opened (raises :class:`StoreOpenError`)."""
    store = store_for(url)
    await store.open()
    return store


def a_store(value: object, where: str) -> Store:
    """``value``, a store; a :class:`TypeError` in one line saying what to do otherwise (above
    all for ``open_store(url)`` not awaited)."""
    if isinstance(value, Store):
        return value
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # (never to be awaited: no warning about it later)
        raise TypeError(
            f"{where} was given a coroutine, not a store: await it first "
            "(store = await open_store(url)), or give the store's URL"
        )
    raise TypeError(f"{where} needs a store (flowtide.store.Store), not {type(value).__name__}")
