"""The HTTP server under load: concurrent clients signalling parked runs and reading them.

Run with ``python benchmarks/bench_server.py [--clients 200] [--seconds 60] [--runs 50]``. It
starts ``flowtide serve --nodes`` (a worker in the same process) on a fresh SQLite file on
127.0.0.1, registers a flow whose one node parks (by key), starts ``--runs`` runs, then
``--clients`` concurrent clients each loop for ``--seconds``: read a random run
(``GET /api/runs/{id}``), then signal it (``POST /api/runs/{id}/signals``, no output: the node
runs again and parks again). It prints the requests made, the errors (a 5xx or a failed
connection), the signals refused or pending (a run not parked at that instant: expected), and
the latency percentiles of each kind of request, measured by the clients (which share the
machine with the server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}

NODES = """\
    from flowtide import Park, node


    @node(id="urn:bench:node:ask", outputs=["done"], parks=True)
    def ask(ctx):
        return Park(key="ask-" + ctx.run_id)
    """

FLOW = {
    "id": "urn:bench:flow:server",
    "entrypoints": {"main": "ask"},
    "placements": [
        {"id": "ask", "kind": "task", "node": "urn:bench:node:ask", "routes": {"done": "end"}},
        {"id": "end", "kind": "terminal"},
    ],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def ready(http: httpx.AsyncClient) -> None:
    for _ in range(600):
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("the server did not start")


async def client(
    http: httpx.AsyncClient, runs: list[str], until: float, found: dict[str, list[float]]
) -> None:
    while time.monotonic() < until:
        run = random.choice(runs)
        for kind in ("read", "signal"):
            started = time.perf_counter()
            try:
                answer = await _request(http, kind, run)
            except httpx.TransportError:
                found["errors"].append(0.0)
                continue
            seconds = time.perf_counter() - started
            if answer.status_code >= 500:
                found["errors"].append(seconds)
            elif kind == "signal" and answer.status_code != 200:
                found["refused"].append(seconds)
            found[kind].append(seconds)


async def _request(http: httpx.AsyncClient, kind: str, run: str) -> httpx.Response:
    if kind == "read":
        return await http.get(f"/api/runs/{run}")
    body = {"placement": "ask", "payload": {"n": 1}, "wait": 5}
    return await http.post(f"/api/runs/{run}/signals", json=body, headers=HEADERS)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def main(clients: int, seconds: float, runs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="flowtide-bench-"))
    (folder / "bench_nodes.py").write_text(textwrap.dedent(NODES))
    port = free_port()
    env = {**os.environ, "FLOWTIDE_API_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "flowtide", "serve", "--port", str(port), "--nodes", "bench_nodes"],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        found = asyncio.run(load(port, clients, seconds, runs))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    total = len(found["read"]) + len(found["signal"])
    print(f"{clients} clients, {seconds:g} s, {runs} runs: {total} requests "
          f"({total / seconds:.0f}/s), {len(found['errors'])} errors, "
          f"{len(found['refused'])} signals refused or pending")  # fmt: skip
    for kind in ("read", "signal"):
        values = found[kind]
        print(
            f"  {kind}: {len(values)}, p50 {percentile(values, 0.5):.0f} ms, "
            f"p99 {percentile(values, 0.99):.0f} ms, max {max(values) * 1000:.0f} ms, "
            f"mean {statistics.fmean(values) * 1000:.0f} ms"
        )


async def load(port: int, clients: int, seconds: float, runs: int) -> dict[str, list[float]]:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as http:
        await ready(http)
        assert (await http.post("/api/flows", json=FLOW, headers=HEADERS)).status_code == 201
        ids = []
        for _ in range(runs):
            answer = await http.post("/api/runs", json={"flow": FLOW["id"]}, headers=HEADERS)
            ids.append(answer.json()["run_id"])
        found: dict[str, list[float]] = {"read": [], "signal": [], "errors": [], "refused": []}
        until = time.monotonic() + seconds
        await asyncio.gather(*(client(http, ids, until, found) for _ in range(clients)))
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    main(options.clients, options.seconds, options.runs)
