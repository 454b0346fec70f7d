"""``flowtide worker --metrics-port``: the worker's Prometheus metrics, served from its own
process."""

from __future__ import annotations

import re
import signal
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from tests.cli.test_worker_drain import cli, start, until, worker

runner = CliRunner()


def test_a_worker_serves_its_metrics(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "worker.log"
    process = worker(store, log, "--metrics-port", "0")
    try:
        said = until(lambda: re.search(r"metrics at (http://\S+)", log.read_text()), "metrics")
        url = said.group(1)
        run, _, _ = start(tmp_path, store, seconds=0)
        until(lambda: cli("runs", "--store", store)[0]["lifecycle"] == "completed", "the end")
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert run
    assert re.search(r"^flowtide_commit_seconds_count [1-9]", text, re.M), text
    assert 'flowtide_worker_attempt_seconds_count{outcome="finished"} 2.0' in text
    assert re.search(r"^flowtide_sweeper_lateness_seconds_count [1-9]", text, re.M), text
    assert "flowtide_lease_takeovers_total 0.0" in text
    assert 'flowtide_worker_events_total{kind="run_finished"} 1.0' in text


def test_a_metrics_port_in_use_is_bad_input(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = f"sqlite:///{tmp_path / 'runs.db'}"
        result = runner.invoke(app, ["worker", "--store", store, "--metrics-port", str(port)])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert f"--metrics-port: cannot listen on 127.0.0.1:{port}" in result.output
