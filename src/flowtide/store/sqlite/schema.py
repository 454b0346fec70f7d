"""Opening a SQLite store's database: the connection's settings, and its schema brought up to
date by the numbered migrations of :mod:`flowtide.store.sqlite.migrations` (or refused).

Migrations run inside ``BEGIN IMMEDIATE``: two processes opening one new file at once do not
both migrate it (the second waits, then finds the schema current). A database whose schema is
newer than this code's is refused unless its ``min_reader_version`` says this code may read it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from flowtide.store.base import StoreOpenError, StoreSchemaError
from flowtide.store.sqlfiles import Migration, load_migrations, unapplied
from flowtide.store.sqlite.sql import QUERIES, damaged, immediate

__all__ = ["CODE_VERSION", "MIGRATIONS", "SYNCHRONOUS", "open_database", "statements"]

MIGRATIONS = load_migrations("flowtide.store.sqlite.migrations")
CODE_VERSION = MIGRATIONS[-1].version
"""The schema version this code writes (its highest migration)."""
SYNCHRONOUS = ("FULL", "NORMAL")
"""The ``synchronous`` settings a store may be opened with (FULL: each commit is on disk)."""
BUSY_TIMEOUT_MS = 30_000
MIN_SQLITE = (3, 35)
"""RETURNING came with SQLite 3.35."""
_MIN_READER = re.compile(r"^--\s*min_reader_version:\s*(\d+)\s*$", re.MULTILINE)


def open_database(path: str, synchronous: str) -> sqlite3.Connection:
    """A connection to the store at ``path``, its schema current (raises
    :class:`StoreOpenError`, or :class:`StoreSchemaError` for a schema this code cannot use)."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StoreOpenError(
            f"cannot open the SQLite store {path}: SQLite {sqlite3.sqlite_version} is too old "
            f"(Flowtide needs {'.'.join(map(str, MIN_SQLITE))} or later)"
        )
    parent = Path(path).parent
    if not parent.is_dir():
        raise StoreOpenError(
            f"cannot open the SQLite store {path}: the directory {parent} does not exist"
        )
    if Path(path).is_dir():
        raise StoreOpenError(f"cannot open the SQLite store {path}: it is a directory")
    try:
        _create_private(path)
        conn = sqlite3.connect(path, isolation_level=None, cached_statements=256)
    except (sqlite3.Error, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise StoreOpenError(f"cannot open the SQLite store {path}: {reason}") from error
    try:
        conn.row_factory = sqlite3.Row
        _configure(conn, synchronous)
        _migrate(conn, path)
    except sqlite3.Error as error:
        conn.close()
        raise StoreOpenError(_why_not(path, error)) from error
    except BaseException:
        conn.close()
        raise
    return conn


PRIVATE = 0o600
"""A new database file's mode: runs hold their users' data, so only the owner may read it.
SQLite gives its ``-wal`` and ``-shm`` files the database file's mode."""


def _create_private(path: str) -> None:
    """Create the database file, empty (SQLite makes an empty file a new database), with mode
    :data:`PRIVATE` whatever the umask, unless it exists (or another process creates it first)."""
    if path == ":memory:" or os.path.exists(path):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, PRIVATE)  # (the umask may have taken bits away; fchmod is not masked)
    finally:
        os.close(fd)


def _configure(conn: sqlite3.Connection, synchronous: str) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _write_ahead(conn)
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")


def _write_ahead(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode. Switching needs the database to itself, and SQLite does
    not wait for that (busy_timeout does not apply): when other processes open a new file at the
    same moment, the switch is tried again until it is done or the busy timeout has passed."""
    give_up = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > give_up:
                raise
            time.sleep(0.005)


def _why_not(path: str, error: sqlite3.Error) -> str:
    name = getattr(error, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return f"cannot open the SQLite store {path}: the file is not a SQLite database"
    if name.startswith("SQLITE_CORRUPT"):
        return damaged(path, error)
    return f"cannot open the SQLite store {path}: {error}"


def _migrate(conn: sqlite3.Connection, path: str) -> None:
    """Apply the migrations the database lacks, in one transaction (or refuse the database)."""
    with immediate(conn):
        tables = [row["name"] for row in conn.execute(QUERIES["schema_tables"])]
        version, min_reader = 0, 0
        if "flowtide_schema" in tables:
            row = conn.execute(QUERIES["schema_version"]).fetchone()
            if row is not None:
                version, min_reader = row["version"], row["min_reader_version"]
        elif tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreSchemaError(
                f"cannot open the SQLite store {path}: it is a SQLite database without "
                f"Flowtide's schema (its tables: {shown})"
            )
        if version > CODE_VERSION:
            if min_reader > CODE_VERSION:
                raise StoreSchemaError(
                    f"cannot open the SQLite store {path}: its schema is version {version}, "
                    f"this Flowtide knows versions up to {CODE_VERSION}: upgrade Flowtide"
                )
            return
        for migration in unapplied(MIGRATIONS, version):
            _apply(conn, migration)


def _apply(conn: sqlite3.Connection, migration: Migration) -> None:
    for statement in statements(migration.sql):
        conn.execute(statement)
    found = _MIN_READER.search(migration.sql)
    conn.execute(
        QUERIES["record_migration"],
        {
            "version": migration.version,
            "name": migration.name,
            "min_reader_version": int(found[1]) if found else migration.version,
        },
    )


def statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one at a time (a ``;`` inside a string or a trigger
    does not end one); comments alone are skipped."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                yield pending.strip()
            pending = ""
    if _has_code(pending):
        yield pending.strip()


def _has_code(text: str) -> bool:
    lines = (line.split("--", 1)[0].strip(" \t;") for line in text.splitlines())
    return any(lines)
