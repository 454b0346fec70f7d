"""The PostgreSQL store's schema on open: created if missing, brought up to the code's version,
refused when it is newer than the code can use.

Every version applied is a row of ``flowtide_schema``: its number, its name, the lowest code
version that can still use a database at that version (``min_reader_version``, from a
``-- min_reader_version: N`` line of the migration, else the version itself), and when it was
applied. Openers migrate in one transaction under a transaction-level advisory lock whose key
comes from the schema's name, so that concurrent openers of one schema migrate it once, one
after the other, and those of other schemas do not wait for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from flowtide.store.base import StoreSchemaError
from flowtide.store.postgres.queries import Q, advisory_key, with_schema
from flowtide.store.sqlfiles import Migration, load_migrations, unapplied

__all__ = ["CODE_VERSION", "MIGRATIONS", "SchemaVersion", "migrate", "min_reader_version"]

MIGRATIONS: Final[list[Migration]] = load_migrations("flowtide.store.postgres.migrations")
CODE_VERSION: Final[int] = MIGRATIONS[-1].version
"""The schema version this code writes."""

_MIN_READER = re.compile(r"^--\s*min_reader_version:\s*(\d+)\s*$", re.MULTILINE)


def min_reader_version(migration: Migration) -> int:
    """The lowest code version that can use a database once ``migration`` is applied."""
    found = _MIN_READER.search(migration.sql)
    return int(found[1]) if found is not None else migration.version


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """What an open found and did: the version the schema had, and the version it has now."""

    found: int
    now: int


async def migrate(
    connection: psycopg.AsyncConnection[Any], schema: str, where: str
) -> SchemaVersion:
    """Bring ``schema`` up to :data:`CODE_VERSION` (``where`` names the database in errors);
    raises :class:`StoreSchemaError` (changing nothing) if it is not a schema this code can
    use."""
    async with connection.transaction():
        await connection.execute(Q["lock_schema"], {"key": advisory_key(schema)})
        await connection.execute(with_schema("create_schema", schema))
        cursor = await connection.execute(Q["schema_tables"], {"schema": schema})
        tables = {str(row[0]) for row in await cursor.fetchall()}
        found = 0
        if "flowtide_schema" in tables:
            cursor = await connection.execute(Q["schema_version"])
            row = await cursor.fetchone()
            if row is not None:
                found, readable_from = int(row[0]), int(row[1])
                _check_readable(schema, where, found, readable_from)
        elif tables:
            raise StoreSchemaError(
                f"schema {schema!r} of the PostgreSQL database {where} holds tables that are not "
                "Flowtide's: give the store a schema of its own"
            )
        for migration in unapplied(MIGRATIONS, found):
            await connection.execute(migration.sql.encode())
            await connection.execute(
                Q["record_migration"],
                {
                    "version": migration.version,
                    "name": migration.name,
                    "min_reader_version": min_reader_version(migration),
                },
            )
    return SchemaVersion(found, max(found, CODE_VERSION))


def _check_readable(schema: str, where: str, version: int, readable_from: int) -> None:
    if version > CODE_VERSION and readable_from > CODE_VERSION:
        raise StoreSchemaError(
            f"schema {schema!r} of the PostgreSQL database {where} is at version {version} "
            f"(usable from version {readable_from}); this Flowtide knows versions up to "
            f"{CODE_VERSION}: upgrade Flowtide"
        )
