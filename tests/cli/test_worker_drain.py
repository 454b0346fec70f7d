"""``flowtide worker`` in its own process: it logs a line per run, and SIGTERM drains it (the
node in flight finishes, the run moves on), while a second SIGTERM stops it at once (the node
in flight runs again on the next worker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from flowtide.cli.app import app

runner = CliRunner()
NODES = "tests.cli.drain_nodes"


def flow(tmp_path: Path) -> Path:
    doc = tmp_path / "slow.yaml"
    doc.write_text(
        "id: urn:test:drain\n"
        "entrypoints: {main: slow}\n"
        "placements:\n"
        "  - {id: slow, kind: task, node: 'test:drain:slow', routes: {done: after}}\n"
        "  - {id: after, kind: task, node: 'test:drain:after', routes: {done: end}}\n"
        "  - {id: end, kind: terminal}\n"
    )
    return doc


def worker(store: str, log: Path, *options: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", NODES, "--store", store,
             "--poll", "0.05", *options],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


def cli(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def until(check: Callable[[], Any], what: str, patience: float = 30.0) -> Any:
    end = time.monotonic() + patience
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {patience} s")


def lines(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def start(tmp_path: Path, store: str, seconds: float) -> tuple[str, Path, Path]:
    notes, gate = tmp_path / "notes.log", tmp_path / "gate"
    given = json.dumps({"log": str(notes), "gate": str(gate), "seconds": seconds})
    run = cli("start", str(flow(tmp_path)), "--store", store, "--input", given)["run_id"]
    return run, notes, gate


def test_sigterm_lets_the_node_in_flight_finish_and_the_run_move_on(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "worker.log"
    process = worker(store, log)
    try:
        run, notes, _ = start(tmp_path, store, seconds=1.5)
        until(lambda: lines(notes) == ["started"], "the slow node starts")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert lines(notes) == ["started", "finished", "after"]
    (shown,) = cli("runs", "--store", store)
    assert (shown["run_id"], shown["lifecycle"]) == (run, "completed")
    said = log.read_text()
    assert f"took run {run[:12]} (flow urn:test:drain)" in said
    assert "SIGTERM: taking no new run" in said
    assert "draining: 1 run(s) in flight, up to 30 s" in said
    assert f"run {run[:12]} (flow urn:test:drain) ended: completed" in said
    assert said.index("draining") < said.index("ended: completed"), said


def test_a_second_sigterm_stops_at_once_and_the_next_worker_runs_the_node_again(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "worker.log"
    first = worker(store, log)
    try:
        _, notes, gate = start(tmp_path, store, seconds=600)
        until(lambda: lines(notes) == ["started"], "the slow node starts")
        first.send_signal(signal.SIGTERM)
        until(lambda: "draining: 1 run(s) in flight" in log.read_text(), "the worker drains")
        stopping = time.monotonic()
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=15) == 0, log.read_text()
        assert time.monotonic() - stopping < 10
    finally:
        if first.poll() is None:
            first.kill()
    assert "second signal (SIGTERM): stopping at once" in log.read_text()
    assert lines(notes) == ["started"], "the node in flight did not finish"
    (shown,) = cli("runs", "--store", store)
    assert (shown["lifecycle"], shown["held_by"]) == ("running", None)
    second = worker(store, log, "--quiet")
    try:
        until(lambda: lines(notes) == ["started", "started"], "the next worker runs it again")
        gate.touch()
        until(lambda: cli("runs", "--store", store)[0]["lifecycle"] == "completed", "the end")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0, log.read_text()
    assert lines(notes) == ["started", "started", "finished", "after"]


def test_a_log_level_that_is_not_one_is_bad_input(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    result = runner.invoke(app, ["worker", "--store", store], env={"FLOWTIDE_LOG": "loud"})
    assert result.exit_code == 2
    assert "$FLOWTIDE_LOG='loud' is not a log level" in result.output
