"""``flowtide serve`` as a process: on a SQLite store with ``--nodes`` (a worker in the same
process) and FLOWTIDE_API_TOKEN, a flow registered and a run started over HTTP parks, is
signalled by key and completes; the token never reaches the log; SIGTERM stops it (exit 0).
Without a token it says it is read-only; a bad token file is bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "serve-test-token-7"

NODES = """\
    from flowtide import Park, node


    @node(id="urn:test:node:serve-ask", outputs=["approved"], parks=True, timeout="PT1H")
    def ask(ctx):
        return Park(key="ask-" + ctx.state["order"])
    """

FLOW = {
    "id": "urn:test:flow:serve",
    "entrypoints": {"main": "ask"},
    "placements": [
        {
            "id": "ask",
            "kind": "task",
            "node": "urn:test:node:serve-ask",
            "routes": {"approved": "end", "timeout": "end"},
        },
        {"id": "end", "kind": "terminal"},
    ],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def until(check: Any, what: str, patience: float = 20.0) -> Any:
    end = time.monotonic() + patience
    while time.monotonic() < end:
        try:
            found = check()
        except httpx.TransportError:
            found = None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {patience} s")


def test_serve_runs_the_api_and_a_worker_on_sqlite(tmp_path: Path) -> None:
    (tmp_path / "serve_nodes.py").write_text(textwrap.dedent(NODES))
    port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT / "src"),
        "FLOWTIDE_API_TOKEN": TOKEN,
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "serve", "--port", str(port),
             "--nodes", "serve_nodes", "--log-json"],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    write = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
            until(lambda: http.get("/readyz").status_code == 200, "the server is ready")
            assert http.post("/api/flows", json=FLOW, headers=write).status_code == 201
            started = http.post(
                "/api/runs", json={"flow": FLOW["id"], "input": {"order": "9"}}, headers=write
            )
            assert started.status_code == 201, started.text
            run = started.json()["run_id"]
            until(
                lambda: http.get(f"/api/runs/{run}").json()["lifecycle"] == "parked",
                "the run parks",
            )
            signalled = http.post(
                "/api/signals", json={"key": "ask-9", "output": "approved"}, headers=write
            )
            assert signalled.status_code == 200, signalled.text
            until(
                lambda: http.get(f"/api/runs/{run}").json()["lifecycle"] == "completed",
                "the run completes",
            )
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    text = log.read_text()
    assert code == 0, text
    assert (tmp_path / "flowtide.db").exists()  # (the SQLite default)
    assert "with a worker in this process" in text
    assert TOKEN not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert {"method": "POST", "route": "/api/signals", "status": 200} in [
        {k: line[k] for k in ("method", "route", "status")} for line in lines
    ]


def test_serve_says_read_only_and_refuses_a_bad_token_file(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.txt"
    bad.write_text("ops:one\nno-colon-here\n")
    result = CliRunner().invoke(app, ["serve", "--token-file", str(bad)])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert f"{bad}:2: expected 'name:token'" in result.stderr
    assert "one" not in result.stderr.replace("tokens", "")
