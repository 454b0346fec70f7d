"""A libpq connection string names a PostgreSQL database, never a SQLite file, and its password
is never shown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.store.postgres import PostgresStore
from flowtide.store.urls import is_conninfo, redact, store_for
from tests.postgres_schemas import Schemas

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "examples" / "checkout-node-anchor.yaml"
SECRET = "hunter2"


def test_a_connection_string_is_postgresql() -> None:
    store = store_for(f"host=db1 port=5433 dbname=runs user=app password={SECRET}")
    assert isinstance(store, PostgresStore)
    assert SECRET not in repr(store)
    store = store_for("host=db1 dbname=runs schema=shop_runs")
    assert isinstance(store, PostgresStore) and store.schema == "shop_runs"
    assert not is_conninfo("runs.db") and not is_conninfo("sqlite:///a=b.db")


@pytest.mark.parametrize(
    "text",
    [
        f"host=db1 password={SECRET} dbname=runs",
        f"host=db1 password = '{SECRET} and more' dbname=runs",
        f"host=db1 password='it\\'s {SECRET}'",
        f"postgresql://app@db1/runs?password={SECRET}",
    ],
)
def test_passwords_are_redacted_quoted_or_not(text: str) -> None:
    shown = redact(text)
    assert SECRET not in shown and "***" in shown
    assert "db1" in shown


def test_an_unreachable_database_by_connection_string_is_bad_input_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    conninfo = f"host=127.0.0.1 port=1 dbname=runs user=app password={SECRET}"
    for command in (["runs"], ["show", "r"], ["start", str(CHECKOUT)]):
        result = runner.invoke(app, [*command, "--store", conninfo])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert SECRET not in result.output
        assert len(result.stderr.strip().splitlines()) == 1
        assert "PostgreSQL database 'app@127.0.0.1:1/runs'" in result.stderr
    # (A worker waits for a server that is not up yet; one that refuses it stops it at once.)
    refusing = f"host=127.0.0.1 port=5432 dbname=test user=flowtide_no_role password={SECRET}"
    result = runner.invoke(app, ["worker", "--store", refusing])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert SECRET not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert "'flowtide_no_role@127.0.0.1:5432/test'" in result.stderr
    assert "refused these credentials" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the string


def test_a_string_that_is_no_connection_string_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["runs", "--store", f"hots=db1 password={SECRET}"])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert SECRET not in result.output
    assert 'invalid connection option "hots"' in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_worker_on_a_connection_string_never_prints_its_password(
    schemas: Schemas, tmp_path: Path
) -> None:
    conninfo = (
        f"host=127.0.0.1 port=5432 dbname=test user=postgres password={SECRET} "
        f"schema={schemas.new()}"
    )
    result = runner.invoke(app, ["runs", "--store", conninfo])
    assert result.exit_code == ExitCode.OK, result.output
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--store", conninfo],
            stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
    try:
        end = time.monotonic() + 30
        while "taking runs" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    text = log.read_text()
    assert "taking runs" in text and "password=***" in text
    assert SECRET not in text
    assert list(tmp_path.iterdir()) == [log]
