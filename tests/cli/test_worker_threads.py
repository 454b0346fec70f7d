"""``flowtide worker --threads N``: the worker threads of sync nodes (and so how many of their
attempts run at once)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.cli import worker as worker_command
from flowtide.engine import Engine
from flowtide.engine.worker.threadslots import DEFAULT_THREADS

runner = CliRunner()


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The options of each engine the worker makes; it stops at once instead of working."""
    made: list[dict[str, Any]] = []

    class Made(Exception):
        pass

    def engine(**options: Any) -> Engine:
        made.append(options)
        raise Made

    monkeypatch.setattr(worker_command, "Engine", engine)
    return made


def test_threads_sets_the_engines_worker_threads(
    engines: list[dict[str, Any]], tmp_path: Any
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    runner.invoke(app, ["worker", "--threads", "3", "--store", store])
    runner.invoke(app, ["worker", "--store", store])
    assert [e["max_threads"] for e in engines] == [3, DEFAULT_THREADS]


def test_threads_must_be_at_least_one(tmp_path: Any) -> None:
    result = runner.invoke(app, ["worker", "--threads", "0", "--store", "sqlite:///x.db"])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "--threads" in result.output
