"""Clients need no node code: from a folder where no node module can be imported, with no
``--nodes``, ``start``, ``show``, ``runs``, ``history`` and ``explain`` work for a run that a
worker process, in another folder with the nodes, drives (on SQLite and on PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from tests.cli.test_operate import until
from tests.postgres_schemas import Schemas

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]

NODES = """\
    from flowtide import Park, node


    @node(id="urn:test:node:note", outputs=["done"])
    def note(ctx):
        ctx.state["noted"] = True
        return "done"


    @node(id="urn:test:node:ask", outputs=["approved"], parks=True, timeout="PT1H")
    def ask(ctx):
        return Park(key="ask-" + ctx.run_id)
    """

FLOW = {
    "id": "urn:test:flow:codefree",
    "entrypoints": {"main": "note"},
    "placements": [
        {"id": "note", "kind": "task", "node": "urn:test:node:note", "routes": {"done": "ask"}},
        {
            "id": "ask",
            "kind": "task",
            "node": "urn:test:node:ask",
            "routes": {"approved": "end", "timeout": "end"},
        },
        {"id": "end", "kind": "terminal"},
    ],
}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    schemas: Schemas = request.getfixturevalue("schemas")
    join = "&" if "?" in schemas.url else "?"
    return f"{schemas.url}{join}schema={schemas.new()}"


@pytest.fixture
def worker(store: str, tmp_path: Path) -> Iterator[Path]:
    """A worker process in a folder of its own, with the nodes module there."""
    folder = tmp_path / "worker"
    folder.mkdir()
    (folder / "codefree_nodes.py").write_text(textwrap.dedent(NODES))
    log = tmp_path / "worker.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", "codefree_nodes",
             "--store", store, "--poll", "0.05", "--quiet"],
            cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    yield log
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, log.read_text()


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder: no node module can be imported from it."""
    folder = tmp_path / "client"
    folder.mkdir()
    (folder / "flow.yaml").write_text(yaml.safe_dump(FLOW, sort_keys=False))
    monkeypatch.chdir(folder)
    monkeypatch.delenv("FLOWTIDE_DEBUG", raising=False)
    return folder


def cli(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_start_show_runs_history_and_explain_need_no_node_code(
    store: str, worker: Path, client: Path
) -> None:
    with pytest.raises(ImportError):
        __import__("codefree_nodes")  # (nothing of the nodes here)
    run = cli("start", "flow.yaml", "--store", store)["run_id"]
    parks = until(lambda: cli("show", run, "--store", store)["parks"], "the run parks")
    assert parks[0]["placement"] == "ask"
    shown = cli("status", run, "--store", store)
    assert shown["lifecycle"] == "parked" and shown["state"] == {"noted": True}
    (listed,) = cli("runs", "--store", store)
    assert listed["run_id"] == run
    kinds = [e["kind"] for e in cli("history", run, "--store", store)]
    assert kinds[:2] == ["run_started", "node_started"] and "parked" in kinds
    (window,) = cli("explain", run, "--store", store)
    assert window["placement"] == "ask" and window["timeout"] is not None
    assert window["timeout_source"] == "implementation default"
    text = runner.invoke(app, ["explain", run, "--store", store, "--placement", "ask"])
    assert text.exit_code == ExitCode.OK, text.output
    assert "timeout set by: implementation default" in text.stdout
    assert "internal error" not in text.output
