"""Schema version 4 on a database that had flows before it: each document's instant is that of
the first run started on it (none without runs), the documents keep their order, and one stored
afterwards is the latest of its id. On SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from flowtide.store import RunRecord, Store, StoredFlow
from flowtide.store.sqlite import SQLiteStore
from flowtide.testing.storechecks.support import at
from tests.postgres_schemas import Schemas

A, B = "urn:test:a", "urn:test:b"


def document(flow_id: str, version: str) -> StoredFlow:
    digest = hashlib.sha256(f"{flow_id} {version}".encode()).hexdigest()
    return StoredFlow(flow_id, version, digest, {"id": flow_id, "version": version})


async def fill(store: Store) -> None:
    """Documents stored as a Flowtide before version 4 stored them (no instant), and runs."""
    for flow in (document(A, "1"), document(B, "1"), document(A, "2")):
        await store.put_flow(flow)
    for n, seconds in enumerate((9, 5)):
        options = {"flow_digest": document(A, "2").digest}
        await store.create_run(
            RunRecord(f"r{n}", A, "2", "pending", at(seconds), options=options), {}
        )


async def migrated(store: Store) -> None:
    versions = await store.flow_versions()
    assert [(v.flow_id, v.version, v.stored_at, v.runs, v.latest) for v in versions] == [
        (A, "1", None, 0, False),
        (A, "2", at(5), 2, True),
        (B, "1", None, 0, True),
    ]
    assert (await store.latest_flow(A)).version == "2"
    assert await store.put_flow(document(A, "3"), stored_at=at(20)) is True
    assert (await store.latest_flow(A)).version == "3"


async def test_a_sqlite_database_gets_version_4(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with SQLiteStore(path) as store:
        await fill(store)
    conn = sqlite3.connect(path)
    with conn:  # (back to version 3, as it was)
        for statement in (
            "DROP INDEX flows_by_order",
            "DROP INDEX runs_by_flow_document",
            "ALTER TABLE flows DROP COLUMN stored_order",
            "ALTER TABLE flows DROP COLUMN stored_at",
            "DROP TABLE workers",  # (version 5's, applied again after 4)
            "DELETE FROM flowtide_schema WHERE version >= 4",
        ):
            conn.execute(statement)
    conn.close()
    async with SQLiteStore(path) as store:
        await migrated(store)


async def test_a_postgres_schema_gets_version_4(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as store:
        await fill(store)
    for statement in (
        "DROP INDEX {schema}.flows_by_order",
        "DROP INDEX {schema}.runs_by_flow_document",
        "ALTER TABLE {schema}.flows DROP COLUMN stored_order, DROP COLUMN stored_at",
        "DROP TABLE {schema}.workers",  # (version 5's, applied again after 4)
        "DROP FUNCTION {schema}.flowtide_commit_guard",  # (version 6's)
        "ALTER TABLE {schema}.runs DROP COLUMN deadline_fired",  # (version 7's)
        "DELETE FROM {schema}.flowtide_schema WHERE version >= 4",
    ):
        schemas.query(statement, schema)
    async with schemas.store(schema) as store:
        await migrated(store)
