"""Named queries and migrations read from ``.sql`` files."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtide.store.postgres.queries import Q as POSTGRES_QUERIES
from flowtide.store.sqlfiles import (
    COMMIT_QUERIES,
    PRUNED_TABLES,
    load_migrations,
    load_queries,
    unapplied,
)
from flowtide.store.sqlite.sql import QUERIES as SQLITE_QUERIES


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "sqlpkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield folder
    sys.modules.pop("sqlpkg", None)


def test_queries_are_read_by_name(package: Path) -> None:
    (package / "q.sql").write_text(
        "-- The header says nothing.\n"
        "-- name: one\n-- What it does.\nSELECT 1;\n\n"
        "-- name: two\nUPDATE t\n  SET x = :x;\n"
    )
    assert load_queries("sqlpkg", "q.sql") == {"one": "SELECT 1;", "two": "UPDATE t\n  SET x = :x;"}


def test_a_query_named_twice_or_empty_is_refused(package: Path) -> None:
    (package / "twice.sql").write_text("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n")
    with pytest.raises(ValueError, match="'one' is defined twice"):
        load_queries("sqlpkg", "twice.sql")
    (package / "empty.sql").write_text("-- name: one\n-- nothing\n")
    with pytest.raises(ValueError, match="'one' is empty"):
        load_queries("sqlpkg", "empty.sql")


def test_migrations_run_in_order_once_each(package: Path) -> None:
    (package / "0002_more.sql").write_text("ALTER TABLE t ADD y;")
    (package / "0001_initial.sql").write_text("CREATE TABLE t (x);")
    (package / "notes.txt").write_text("not a migration")
    assert [(m.version, m.name) for m in load_migrations("sqlpkg")] == [(1, "initial"), (2, "more")]
    (package / "0003_later.sql").write_text("SELECT 1;")
    found = load_migrations("sqlpkg")
    assert [m.version for m in found] == [1, 2, 3]
    assert [m.version for m in unapplied(found, 1)] == [2, 3]
    assert unapplied(found, 3) == []
    (package / "0003_again.sql").write_text("SELECT 2;")
    with pytest.raises(ValueError, match="two migrations 0003"):
        load_migrations("sqlpkg")


def test_a_missing_version_is_refused(package: Path) -> None:
    (package / "0001_initial.sql").write_text("CREATE TABLE t (x);")
    (package / "0003_later.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match="migration 0002 is missing"):
        load_migrations("sqlpkg")


def test_the_first_migration_is_number_one(package: Path) -> None:
    (package / "0002_more.sql").write_text("ALTER TABLE t ADD y;")
    with pytest.raises(ValueError, match="migration 0001 is missing"):
        load_migrations("sqlpkg")


@pytest.mark.parametrize("queries", [SQLITE_QUERIES, POSTGRES_QUERIES], ids=["sqlite", "postgres"])
def test_every_sql_store_names_a_commits_statements_alike(queries: dict[str, str]) -> None:
    wanted = [*COMMIT_QUERIES, *(f"prune_{table}" for table in PRUNED_TABLES)]
    assert [name for name in wanted if name not in queries] == []
