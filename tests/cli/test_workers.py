"""``flowtide workers`` lists the workers on a store from their heartbeats; ``runs`` and
``show`` say which node a run no live worker can drive waits for."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from flowtide.cli.app import app
from tests.cli.test_worker_drain import flow, lines, until

runner = CliRunner()


def worker(store: str, log: Path, *options: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--store", store, "--poll", "0.05",
             *options],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


def cli(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, log.read_text()


def test_a_run_no_live_worker_can_drive_says_which_node_it_waits_for(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "worker.log"
    missing = runner.invoke(app, ["workers", "--store", store])  # (a read: nothing is created)
    assert missing.exit_code == 2 and not (tmp_path / "runs.db").exists()
    lacking = worker(store, log)  # (no --nodes)
    try:
        notes = tmp_path / "notes.log"
        given = json.dumps({"log": str(notes), "gate": str(tmp_path / "gate"), "seconds": 0})
        run = cli("start", str(flow(tmp_path)), "--store", store, "--input", given)["run_id"]
        nodes = ["test:drain:after", "test:drain:slow"]
        until(lambda: cli("runs", "--store", store)[0]["waiting_for"] == nodes, "it waits")
        assert cli("show", run, "--store", store)["waiting_for"] == nodes
        shown = runner.invoke(app, ["show", run, "--store", store]).stdout
        assert "waiting for a worker with nodes test:drain:after, test:drain:slow" in shown
        (seen,) = cli("workers", "--store", store)
        assert (seen["host"], seen["pid"], seen["live"]) == (
            socket.gethostname(),
            lacking.pid,
            True,
        )
        assert seen["waiting"] == {run: nodes}
        able = worker(store, log, "--nodes", "tests.cli.drain_nodes")
        try:
            until(lambda: len(cli("workers", "--store", store)) == 2, "two workers")
            until(lambda: lines(notes) == ["started", "finished", "after"], "the run is driven")
            (listed,) = cli("runs", "--store", store)
            assert (listed["lifecycle"], listed["waiting_for"]) == ("completed", [])
            held = {w["pid"]: set(w["nodes"]) for w in cli("workers", "--store", store)}
            assert set(nodes) <= held[able.pid] and not set(nodes) & held[lacking.pid]
            table = runner.invoke(app, ["workers", "--store", store]).stdout
            assert "runs held" in table and "nodes" in table
        finally:
            stop(able, log)
    finally:
        stop(lacking, log)
    said = log.read_text()
    warning = (
        f"WARNING run {run[:12]} cannot be driven here: nodes 'test:drain:after', "
        "'test:drain:slow' are not registered here (a --nodes module must register them); it "
        "waits for a worker that has them"
    )
    assert said.count(warning) == 1, said
    assert cli("workers", "--store", store, "--all") == [], "a worker that stops forgets its beat"
