"""The commands a client runs need no node code: a worker with the node module runs in one
folder; from another folder, with no node code and no ``--nodes``, a run is started, signalled
by key, a run whose node is running is cancelled (that node starts once, a second worker
watching), and a signal sent while every worker is dead is recorded (exit 4) and applied as sent
by the next worker; on SQLite and on PostgreSQL."""

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

from flowtide.cli import ExitCode
from tests.postgres_schemas import Schemas

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}

NODES = """
import asyncio

from flowtide.authoring import node
from flowtide.engine import NodeContext, Park


@node(id="urn:test:node:route", outputs=["ask", "work"])
def route(ctx: NodeContext) -> str:
    return ctx.state["mode"]


@node(id="urn:test:node:approve", outputs=["approved"], parks=True)
async def approve(ctx: NodeContext):
    if ctx.signal is None:
        return Park(key=f"approve-{ctx.state['order']}")
    return "approved"


@node(id="urn:test:node:slow", outputs=["done"])
async def slow(ctx: NodeContext) -> str:
    with open(ctx.state["log"], "a") as started:
        started.write(ctx.run_id + "\\n")
    await asyncio.sleep(300)
    return "done"
"""

FLOW = {
    "id": "urn:test:flow:no-code-client",
    "version": "1",
    "entrypoints": {"main": "route"},
    "node_types": [
        {"id": "urn:test:node:route", "outputs": ["ask", "work"]},
        {"id": "urn:test:node:approve", "parks": True, "outputs": ["approved"]},
        {"id": "urn:test:node:slow", "outputs": ["done"]},
    ],
    "placements": [
        {
            "id": "route",
            "kind": "task",
            "node": "urn:test:node:route",
            "routes": {"ask": "approve", "work": "slow"},
        },
        {
            "id": "approve",
            "kind": "task",
            "node": "urn:test:node:approve",
            "settings": {"timeout": "PT1H"},
            "routes": {"approved": "end", "timeout": "end"},
        },
        {"id": "slow", "kind": "task", "node": "urn:test:node:slow", "routes": {"done": "end"}},
        {"id": "end", "kind": "terminal", "outcome": "done"},
    ],
}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    schemas: Schemas = request.getfixturevalue("schemas")
    yield f"{schemas.url}?schema={schemas.new()}"


class Folders:
    def __init__(self, tmp_path: Path, url: str) -> None:
        self.url = url
        self.workers_folder = tmp_path / "workers"
        self.client_folder = tmp_path / "client"
        self.workers_folder.mkdir()
        self.client_folder.mkdir()
        (self.workers_folder / "shop_nodes.py").write_text(NODES)
        self.flow = self.client_folder / "order.json"
        self.flow.write_text(json.dumps(FLOW))
        self.log = tmp_path / "workers.log"
        self.started = tmp_path / "started.log"
        self.workers: list[subprocess.Popen[bytes]] = []

    def worker(self) -> subprocess.Popen[bytes]:
        command = [
            sys.executable, "-m", "flowtide", "worker", "--nodes", "shop_nodes",
            "--store", self.url, "--poll", "0.05", "--lease", "1", "--quiet",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            process = subprocess.Popen(
                command, cwd=self.workers_folder, env=ENV, stdout=out, stderr=subprocess.STDOUT
            )
        self.workers.append(process)
        return process

    def client(self, *args: str, code: int = ExitCode.OK) -> Any:
        """``flowtide ARGS --store URL --json`` from the client's folder (no node code)."""
        done = subprocess.run(
            [sys.executable, "-m", "flowtide", *args, "--store", self.url, "--json"],
            cwd=self.client_folder, env=ENV, capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        said = done.stdout.decode() + done.stderr.decode()
        assert done.returncode == code, said
        return json.loads(done.stdout) if done.stdout.strip() else None

    def until(self, check: Any, what: str) -> Any:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            found = check()
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"{what}: not within a minute; workers said:\n{self.log.read_text()}")

    def lifecycle(self, run: str) -> str:
        return str(self.client("show", run)["lifecycle"])

    def stop(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers:
            process.wait(timeout=30)


def test_a_client_with_no_node_code_starts_signals_and_cancels(tmp_path: Path, url: str) -> None:
    f = Folders(tmp_path, url)
    try:
        f.worker()
        f.worker()  # (a second worker watching)
        # Started and signalled by key from the client's folder.
        order = {"mode": "ask", "order": 1, "log": str(f.started)}
        first = f.client("start", str(f.flow), "--input", json.dumps(order))["run_id"]
        f.until(lambda: f.client("show", first)["parks"], "the run parks")
        answer = f.client("signal", "--key", "approve-1", "--payload", '{"ok": true}')
        assert answer["accepted"] and answer["placement"] == "approve"
        f.until(lambda: f.lifecycle(first) == "completed", "the signalled run ends")
        # A run whose node is running is cancelled on its worker; the node never starts again.
        busy = {"mode": "work", "order": 2, "log": str(f.started)}
        second = f.client("start", str(f.flow), "--input", json.dumps(busy))["run_id"]
        f.until(lambda: f.started.exists() and second in f.started.read_text(), "the node runs")
        cancelled = f.client("cancel", second, "--reason", "changed my mind")
        assert cancelled == {"run_id": second, "cancelled": True, "lifecycle": "cancelled"}
        time.sleep(1.5)  # (a lease term and more: the watching worker would have taken it)
        assert f.started.read_text().splitlines().count(second) == 1
        # A signal while every worker is dead: recorded, then applied by the next worker.
        third_order = {"mode": "ask", "order": 3, "log": str(f.started)}
        third = f.client("start", str(f.flow), "--input", json.dumps(third_order))["run_id"]
        f.until(lambda: f.client("show", third)["parks"], "the third run parks")
        for process in f.workers:
            process.kill()
            process.wait(timeout=30)
        pending = f.client(
            "signal", "--key", "approve-3", "--payload", '{"late": "no"}', "--wait", "1",
            code=ExitCode.PENDING,
        )  # fmt: skip
        assert pending["pending"] and pending["run_id"] == third
        listed = f.client("show", third)["pending_requests"]
        assert [r["id"] for r in listed] == [pending["request_id"]]
        f.worker()
        f.until(lambda: f.lifecycle(third) == "completed", "the next worker applies the signal")
        shown = f.client("show", third)
        assert shown["state"]["late"] == "no" and shown["pending_requests"] == []
        kinds = [e["kind"] for e in f.client("history", third)]
        assert kinds.count("signalled") == 1
    finally:
        f.stop()
