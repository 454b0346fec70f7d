"""The SQLite store's files: created private, and a database file replaced, deleted, damaged
or read-only is told in one clear error."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowtide.store.base import StoreError, StoreUnusableError
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


def damage(path: Path) -> None:
    """Overwrite the pages after the schema's with bytes SQLite cannot read."""
    with path.open("r+b") as file:
        file.seek(4096 * 2)
        file.write(b"\xde\xad\xbe\xef" * 4096)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` made read-only for this process: by its mode, or, for root (whom modes do not
    stop), by the immutable attribute; the test is skipped where neither can be had."""
    if os.geteuid() != 0:
        path.chmod(0o400)
        try:
            yield
        finally:
            path.chmod(0o600)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a file read-only for root here: {made.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


async def stored(path: Path, *run_ids: str) -> None:
    async with SQLiteStore(path) as store:
        for run_id in run_ids:
            await new_run(store, run_id)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_file_deleted_or_replaced_under_an_open_store_is_refused(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.open()
        await new_run(store, "r1")
        assert await store.next_wake() is not None
        if how == "deleted":
            for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
                (tmp_path / name).unlink(missing_ok=True)
        else:
            await stored(tmp_path / "other.db", "r2")
            os.replace(tmp_path / "other.db", path)
        said = f"the store at {path} was {how}"
        with pytest.raises(StoreUnusableError, match=said):
            await new_run(store, "r3")
        with pytest.raises(StoreUnusableError, match=said):
            await store.next_wake()
        with pytest.raises(StoreUnusableError, match=said):
            await store.wait_changed(0.05)
    finally:
        await store.close()


async def test_a_damaged_file_is_said_to_be_damaged(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    await stored(path, *(f"run-{i}" for i in range(50)))
    damage(path)
    with pytest.raises(StoreError, match=f"the store at {path} is damaged: "):
        async with SQLiteStore(path) as store:
            await store.list_runs()


async def test_a_write_to_a_read_only_file_is_said_to_be_read_only(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    await stored(path, "r1")
    with read_only(path):
        async with SQLiteStore(path) as store:
            assert [run.id for run in await store.list_runs()] == ["r1"]
            with pytest.raises(StoreUnusableError, match=f"the store at {path} is read-only: "):
                await new_run(store, "r2")
