"""The operator commands on a SQLite file, with real worker processes: ``start``, ``worker``,
``signal``, ``cancel``, ``runs``, ``show``, ``history`` and ``explain``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "examples" / "checkout-node-anchor.yaml"
NODES = "flowtide.demo.checkout"
INBOX = "tests.cli.inbox_nodes"
"""The nodes of the two-branch flow (registered by the worker's --nodes)."""


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def worker(store: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process on the store; stopped with SIGTERM at the end (it must exit 0)."""
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", NODES, "--nodes", INBOX,
             "--store", store, "--poll", "0.05", "--json"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    yield process
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, (tmp_path / "worker.log").read_text()


def cli(*args: str, code: int = ExitCode.OK) -> Any:
    """``flowtide ARGS --json``'s answer (the exit code checked)."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if result.stdout.strip() else None


def until(check: Any, what: str, patience: float = 30.0) -> Any:
    end = time.monotonic() + patience
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {patience} s")


def test_a_started_run_waits_in_the_store_for_a_worker(store: str) -> None:
    started = cli("start", str(CHECKOUT), "--store", store, "--input", '{"order": 7}')
    assert started["flow"] == "urn:flowtide:example:checkout-node-anchor"
    (listed,) = cli("runs", "--store", store)
    assert (listed["run_id"], listed["lifecycle"], listed["held_by"]) == (
        started["run_id"],
        "pending",
        None,
    )
    shown = cli("show", started["run_id"], "--store", store)
    assert shown["state"] == {"order": 7} and shown["tokens"] == []
    assert cli("runs", "--store", store, "--lifecycle", "completed") == []


def test_a_worker_runs_it_and_signals_from_other_processes_move_it(
    store: str, worker: subprocess.Popen[bytes]
) -> None:
    run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
    parked = until(lambda: cli("show", run, "--store", store)["parks"], "the run parks")
    assert parked[0]["placement"] == "collect-payment"
    assert parked[0]["key"] == f"charge-{run}-1"
    answer = cli(
        "signal", "--key", f"charge-{run}-1", "--payload", '{"gateway": "paid"}',
        "--nodes", NODES, "--store", store,
    )  # fmt: skip
    assert answer["accepted"] and answer["placement"] == "collect-payment"
    done = until(
        lambda: (s := cli("show", run, "--store", store))["lifecycle"] == "completed" and s,
        "the run ends",
    )
    assert done["outcome"] == "paid"
    kinds = [e["kind"] for e in cli("history", run, "--store", store)]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "signalled" in kinds
    (window,) = cli("explain", run, "--store", store, "--nodes", NODES)
    assert window["placement"] == "collect-payment" and window["anchor"] == "node"
    late = cli(
        "signal", "--key", f"charge-{run}-1", "--payload", '{"gateway": "paid"}',
        "--nodes", NODES, "--store", store, code=ExitCode.REFUSED,
    )  # fmt: skip
    assert late == {"accepted": False, "reason": "moved_on", "message": late["message"]}


def test_a_signal_to_a_run_whose_worker_is_busy_in_another_branch_runs_nothing_twice(
    store: str, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    nodes = INBOX
    doc = tmp_path / "two-branches.yaml"
    doc.write_text(
        "id: urn:test:two-branches\n"
        "entrypoints: {main: fork}\n"
        "placements:\n"
        f"  - {{id: fork, kind: task, node: '{nodes}:fork', routes: {{go: [work, ask]}}}}\n"
        f"  - {{id: work, kind: task, node: '{nodes}:long_work', routes: {{done: j}}}}\n"
        f"  - {{id: ask, kind: task, node: '{nodes}:ask', routes: {{approved: j}}}}\n"
        "  - {id: j, kind: join, mode: all, routes: {success: end}}\n"
        "  - {id: end, kind: terminal}\n"
    )
    log, gate = tmp_path / "attempts.log", tmp_path / "gate"
    given = json.dumps({"log": str(log), "gate": str(gate)})
    run = cli("start", str(doc), "--store", store, "--input", given)["run_id"]

    def kinds() -> list[str]:
        return [e["kind"] for e in cli("history", run, "--store", store)]

    until(lambda: "parked" in kinds(), "the run parks")
    until(log.exists, "the long node runs")
    # Signalled from another process while the worker is in the long node's attempt.
    answer = cli("signal", run, "--placement", "ask", "--store", store)
    assert answer["accepted"] and answer["placement"] == "ask"
    gate.touch()
    until(lambda: "run_finished" in kinds(), "the run ends")
    assert len(log.read_text().splitlines()) == 1, "the long node ran again"
    assert kinds().count("signalled") == 1
    assert cli("runs", "--store", store, "--lifecycle", "completed")[0]["run_id"] == run


def test_cancel_a_parked_run_then_again(store: str, worker: subprocess.Popen[bytes]) -> None:
    run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
    until(lambda: cli("show", run, "--store", store)["parks"], "the run parks")
    cancelled = cli("cancel", run, "--store", store, "--nodes", NODES, "--reason", "no stock")
    assert cancelled == {"run_id": run, "cancelled": True, "lifecycle": "cancelled"}
    again = cli("cancel", run, "--store", store, "--nodes", NODES, code=ExitCode.REFUSED)
    assert again == {"run_id": run, "cancelled": False, "lifecycle": "cancelled"}


def test_an_unknown_run_is_bad_input(store: str) -> None:
    # (cancel first: it writes, so it creates the store the others read)
    for command in (["cancel", "nope"], ["show", "nope"], ["history", "nope"]):
        result = runner.invoke(app, [*command, "--store", store])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert result.stderr.strip() == f"flowtide: no run 'nope' in {store}"


def test_a_store_that_cannot_be_opened_is_one_line_without_its_password(tmp_path: Path) -> None:
    url = "postgresql://flowtide:hunter2@127.0.0.1:1/runs"
    for command in (["runs"], ["show", "r"], ["start", str(CHECKOUT)]):
        result = runner.invoke(app, [*command, "--store", url])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert "hunter2" not in result.output
        assert len(result.stderr.strip().splitlines()) == 1
    (tmp_path / "notes.txt").write_text("not a database")
    result = runner.invoke(app, ["runs", "--store", f"sqlite:///{tmp_path / 'notes.txt'}"])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    result = runner.invoke(app, ["runs", "--store", "mysql://x@y/z"])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "unknown kind of store 'mysql'" in result.stderr


def test_a_parent_shows_where_its_subflows_child_waits(
    store: str, worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        json.dumps(
            {
                "id": "urn:test:flow:order",
                "entrypoints": {"main": "pay"},
                "placements": [
                    {
                        "id": "pay",
                        "kind": "subflow",
                        "flow": "urn:flowtide:example:checkout-node-anchor",
                        "routes": {"success": "done", "error": "done"},
                    },
                    {"id": "done", "kind": "terminal", "outcome": "done"},
                ],
            }
        )
    )
    run = cli("start", str(parent), "--with", str(CHECKOUT), "--store", store)["run_id"]
    (park,) = until(lambda: cli("show", run, "--store", store)["parks"], "the child parks")
    child = park["run_id"]
    assert (park["placement"], park["key"]) == ("collect-payment", f"charge-{child}-1")
    text = runner.invoke(app, ["show", run, "--store", store])
    assert text.exit_code == ExitCode.OK, text.output
    shown = " ".join(text.stdout.split())
    assert "at pay: running, attempt 1" in shown  # (a token with no window)
    assert f"parked at collect-payment in child run {child}" in shown
    cli(
        "signal", "--key", f"charge-{child}-1", "--payload", '{"gateway": "paid"}',
        "--nodes", NODES, "--store", store,
    )  # fmt: skip
    done = until(
        lambda: (s := cli("show", run, "--store", store))["lifecycle"] == "completed" and s,
        "the parent ends",
    )
    assert done["outcome"] == "done"


def test_status_is_show(store: str) -> None:
    run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
    assert cli("status", run, "--store", store) == cli("show", run, "--store", store)


def spawn_worker(store: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", NODES, "--store", store,
             "--poll", "0.05", "--json"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, log.read_text()


def test_a_misspelled_placement_or_key_is_bad_input_naming_what_is_parked(
    store: str, worker: subprocess.Popen[bytes]
) -> None:
    run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
    until(lambda: cli("show", run, "--store", store)["parks"], "the run parks")
    wrong = runner.invoke(app, ["signal", run, "--placement", "collect-paymnt", "--store", store])
    assert wrong.exit_code == ExitCode.BAD_INPUT, wrong.output
    said = wrong.stderr.strip()
    assert len(said.splitlines()) == 1
    assert "'collect-paymnt'" in said and f"parked in run {run!r}: collect-payment" in said
    wrong = runner.invoke(app, ["signal", run, "--key", "charge-nope", "--store", store])
    assert wrong.exit_code == ExitCode.BAD_INPUT, wrong.output
    assert f"charge-{run}-1" in wrong.stderr
    assert cli("show", run, "--store", store)["pending_requests"] == []


def test_a_signal_and_a_cancel_while_no_worker_is_alive_wait_for_the_next_worker(
    store: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    first = spawn_worker(store, log)
    try:
        run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
        until(lambda: cli("show", run, "--store", store)["parks"], "the run parks")
    finally:
        stop(first, log)
    # Nobody runs the checkout now: the signal is recorded, and waits.
    key = f"charge-{run}-1"
    pending = cli(
        "signal", "--key", key, "--payload", '{"gateway": "paid"}', "--wait", "0.5",
        "--store", store, code=ExitCode.PENDING,
    )  # fmt: skip
    assert pending["pending"] and pending["kind"] == "signal" and pending["run_id"] == run
    text = runner.invoke(app, ["signal", "--key", key, "--wait", "0", "--store", store])
    assert text.exit_code == ExitCode.PENDING, text.output
    assert "recorded" in text.stderr and "a worker takes the run" in " ".join(text.stderr.split())
    shown = cli("show", run, "--store", store)
    listed = [(r["id"], r["kind"]) for r in shown["pending_requests"]]
    assert listed[0] == (pending["request_id"], "signal") and len(listed) == 2
    human = runner.invoke(app, ["show", run, "--store", store])
    assert f"pending signal request {pending['request_id']}" in " ".join(human.stdout.split())
    second = spawn_worker(store, log)
    try:
        done = until(
            lambda: (s := cli("show", run, "--store", store))["lifecycle"] == "completed" and s,
            "the next worker applies the signal as it was sent",
        )
    finally:
        stop(second, log)
    assert done["outcome"] == "paid" and done["state"]["gateway"] == "paid"
    assert done["pending_requests"] == []
    kinds = [e["kind"] for e in cli("history", run, "--store", store)]
    assert kinds.count("signalled") == 1


def test_a_cancel_waits_for_a_worker_and_is_applied_by_the_next(store: str, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    run = cli("start", str(CHECKOUT), "--store", store)["run_id"]
    pending = cli("cancel", run, "--wait", "0", "--store", store, code=ExitCode.PENDING)
    assert (pending["kind"], pending["run_id"]) == ("cancel", run)
    worker = spawn_worker(store, log)
    try:
        until(
            lambda: cli("show", run, "--store", store)["lifecycle"] == "cancelled",
            "the next worker applies the cancel",
        )
    finally:
        stop(worker, log)
    again = cli("cancel", run, "--store", store, code=ExitCode.REFUSED)
    assert again == {"run_id": run, "cancelled": False, "lifecycle": "cancelled"}
