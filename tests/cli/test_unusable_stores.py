"""A SQLite file that is damaged, read-only, deleted or replaced: the commands say so in one
line and exit 2; a worker says so once and stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from tests.store.test_sqlite_files import damage, read_only

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "examples" / "checkout-node-anchor.yaml"
NODES = "flowtide.demo.checkout"


def started(path: Path) -> str:
    """A run started in the SQLite file at ``path`` (no worker runs it yet)."""
    result = runner.invoke(app, ["start", str(CHECKOUT), "--store", str(path), "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    return str(json.loads(result.stdout)["run_id"])


def lifecycle(path: Path, run_id: str) -> str:
    result = runner.invoke(app, ["show", run_id, "--store", str(path), "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    return str(json.loads(result.stdout)["lifecycle"])


def worker(path: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", NODES, "--store", str(path),
             "--poll", "0.05", "--quiet"],
            stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip


def stopped(process: subprocess.Popen[bytes], log: Path) -> str:
    """What the worker said, once it stopped by itself with exit 2."""
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"the worker did not stop:\n{log.read_text()}") from None
    text = log.read_text()
    assert code == ExitCode.BAD_INPUT, text
    return text


def test_runs_and_show_on_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    run_id = started(path)
    for _ in range(40):
        started(path)
    damage(path)
    for command in (["runs"], ["show", run_id], ["history", run_id]):
        result = runner.invoke(app, [*command, "--store", str(path)])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert result.stderr.startswith(f"flowtide: the store at {path} is damaged: ")
        assert len(result.stderr.strip().splitlines()) == 1


def test_cancel_on_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    run_id = started(path)
    with read_only(path):
        shown = runner.invoke(app, ["show", run_id, "--store", str(path)])
        assert shown.exit_code == ExitCode.OK, shown.output
        result = runner.invoke(app, ["cancel", run_id, "--store", str(path)])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.stderr.startswith(f"flowtide: the store at {path} is read-only: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_worker_on_a_read_only_file_says_so_once_and_stops(tmp_path: Path) -> None:
    path, log = tmp_path / "runs.db", tmp_path / "worker.log"
    started(path)
    with read_only(path):
        text = stopped(worker(path, log), log)
    lines = [line for line in text.splitlines() if "read-only" in line]
    assert lines == [f"flowtide: the store at {path} is read-only: attempt to write a readonly "
                     "database (changing runs needs to write it)"], text  # fmt: skip


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_worker_whose_file_is_deleted_or_replaced_stops(tmp_path: Path, how: str) -> None:
    path, log = tmp_path / "runs.db", tmp_path / "worker.log"
    run_id = started(path)
    process = worker(path, log)
    end = time.monotonic() + 30
    while lifecycle(path, run_id) == "pending" and time.monotonic() < end:
        time.sleep(0.05)  # (until the worker has taken the run)
    if how == "deleted":
        for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
    else:
        started(tmp_path / "other.db")
        os.replace(tmp_path / "other.db", path)
    text = stopped(process, log)
    said = [line for line in text.splitlines() if f"was {how}" in line]
    assert said == [f"flowtide: the store at {path} was {how}"
                    f"{' by another file' if how == 'replaced' else ''} while it was open: what "
                    "is written now would be lost; stop, and start again on the file there is"
                    ], text  # fmt: skip
