"""The SQLite store's files: created private, and a database file replaced, deleted, damaged
or read-only is told in one clear error."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtide.store.sqlite import SQLiteStore
from flowtide.testing.storechecks.support import new_run


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes nothing away: the files' modes are the store's own doing."""
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_new_database_files_are_private_whatever_the_umask(
    tmp_path: Path, open_umask: None
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.open()
        await new_run(store, "r1")
        files = [path, tmp_path / "runs.db-wal", tmp_path / "runs.db-shm"]
        assert {file.name: mode(file) for file in files} == {file.name: 0o600 for file in files}
    finally:
        await store.close()


async def test_an_existing_file_keeps_its_mode(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "runs.db"
    path.touch(mode=0o640)
    store = SQLiteStore(path)
    try:
        await store.open()
        assert mode(path) == 0o640
    finally:
        await store.close()
