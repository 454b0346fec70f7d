"""The HTTP server under load: concurrent clients signalling parked runs and reading them.

Run with ``python benchmarks/bench_server.py [--clients 200] [--seconds 60] [--runs 50]
[--store sqlite|postgres] [--profile FILE]``. It starts ``flowtide serve --nodes`` (a worker in
the same process) on a fresh SQLite file (or a fresh PostgreSQL schema at
``FLOWTIDE_BENCH_POSTGRES_URL``) on 127.0.0.1, registers a flow whose one node parks (by key),
starts ``--runs`` runs, then ``--clients`` concurrent clients each loop for ``--seconds``: read a
random run (``GET /api/runs/{id}``), then signal it (``POST /api/runs/{id}/signals``, no output,
``wait`` 5 s: the node runs again and parks again). It prints the requests made, the answers
by status (a signal to a park another signal has just ended is refused, 409: expected; one not
answered within 5 s is left pending, 202), the errors (a 5xx or a failed connection), the
latency percentiles of each kind of request measured by the clients, and the server's own
(from ``/metrics``: an upper bound, by histogram bucket), and the CPU used meanwhile by the
server, the clients and the whole machine. ``--profile`` samples the server's threads with
py-spy (in the ``bench`` extra) into FILE, as collapsed stacks.

Each client keeps one plain HTTP/1.1 connection: the clients share the machine with the
server, and must cost it as little as they can.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
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
from machine import describe

TOKEN = "bench-token"
POSTGRES = os.environ.get("FLOWTIDE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test")
SCHEMA = f"flowtide_bench_{secrets.token_hex(4)}"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
AUTHORIZATION = f"Authorization: Bearer {TOKEN}"

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


def store_options(store: str) -> list[str]:
    """The server's ``--store``: a fresh SQLite file (the default), or a fresh PostgreSQL
    schema."""
    if store == "sqlite":
        return []
    return ["--store", f"{POSTGRES}?schema={SCHEMA}"]


def drop_schema(store: str) -> None:
    if store == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')


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


class Connection:
    """One kept-alive HTTP/1.1 connection, the least a client can do per request (a few
    microseconds of parsing): httpx with 200 connections in one process spent 6 to 10 ms of
    CPU per request, and on two shared CPUs its own queue then made most of the latency
    measured."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> int:
        """Send the request and read the whole answer; its status."""
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n"
        if body:
            head += f"Content-Type: application/json\r\n{AUTHORIZATION}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        try:
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            return int(status_line.split()[1])
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            writer.close()
            self.streams = None
            raise ConnectionError(f"{method} {path}: no answer") from None

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


SIGNAL = json.dumps({"placement": "ask", "payload": {"n": 1}, "wait": 5}).encode()


async def client(port: int, runs: list[str], until: float, found: dict[str, list[float]]) -> None:
    connection = Connection(port)
    try:
        while time.monotonic() < until:
            run = random.choice(runs)
            for kind in ("read", "signal"):
                started = time.perf_counter()
                try:
                    if kind == "read":
                        status = await connection.request("GET", f"/api/runs/{run}")
                    else:
                        path = f"/api/runs/{run}/signals"
                        status = await connection.request("POST", path, SIGNAL)
                except ConnectionError:
                    found["errors"].append(0.0)
                    continue
                seconds = time.perf_counter() - started
                found.setdefault(f"{kind} {status}", []).append(seconds)
                if status >= 500:
                    found["errors"].append(seconds)
                elif kind == "signal" and status != 200:
                    found["refused"].append(seconds)
                found[kind].append(seconds)
    finally:
        connection.close()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def main(clients: int, seconds: float, runs: int, store: str, profile: str | None) -> None:
    folder = Path(tempfile.mkdtemp(prefix="flowtide-bench-"))
    (folder / "bench_nodes.py").write_text(textwrap.dedent(NODES))
    port = free_port()
    env = {**os.environ, "FLOWTIDE_API_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "flowtide", "serve", "--port", str(port)]
    command += ["--nodes", "bench_nodes", *store_options(store)]
    server = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        found = asyncio.run(load(port, clients, seconds, runs, server.pid, profile))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        drop_schema(store)
    total = len(found["read"]) + len(found["signal"])
    served, clients_cpu, machine = found["cpu"]
    print(describe())
    print(f"CPU, in CPUs busy: server {served:.2f}, clients {clients_cpu:.2f}, "
          f"whole machine {machine:.2f} of {os.cpu_count()}")  # fmt: skip
    print(f"{store}: {clients} clients, {seconds:g} s, {runs} runs: {total} requests "
          f"({total / seconds:.0f}/s), {len(found['errors'])} errors, "
          f"{len(found['refused'])} signals refused or pending")  # fmt: skip
    for kind in ("read", "signal"):
        answers = sorted(k for k in found if k.startswith(f"{kind} "))
        print(
            f"  {kind} answers: "
            + ", ".join(
                f"{k.split()[1]}: {len(found[k])} (p50 {percentile(found[k], 0.5):.0f} ms)"
                for k in answers
            )
        )
    for kind in ("read", "signal"):
        values = found[kind]
        print(
            f"  {kind}: {len(values)}, p50 {percentile(values, 0.5):.0f} ms, "
            f"p95 {percentile(values, 0.95):.0f} ms, p99 {percentile(values, 0.99):.0f} ms, "
            f"max {max(values) * 1000:.0f} ms, "
            f"mean {statistics.fmean(values) * 1000:.0f} ms"
        )
        count, mean, p50, p95, p99 = found[f"server {kind}"]
        print(
            f"    as the server saw them: {count:.0f}, mean {mean * 1000:.0f} ms; "
            f"p50 / p95 / p99 at most {p50 * 1000:g} / {p95 * 1000:g} / {p99 * 1000:g} ms"
        )


def sample(pid: int, seconds: float, into: str) -> subprocess.Popen[bytes]:
    """py-spy sampling every thread of the server (the store's thread too, not the clients)
    for ``seconds``, its stacks written collapsed into ``into``."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    command = [spy, "record", "--threads", "--idle", "--format", "raw", "-o", into]
    command += ["--duration", str(int(seconds)), "--pid", str(pid)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


async def load(
    port: int, clients: int, seconds: float, runs: int, pid: int, profile: str | None
) -> dict[str, list[float]]:
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        await ready(http)
        assert (await http.post("/api/flows", json=FLOW, headers=HEADERS)).status_code == 201
        ids = []
        for _ in range(runs):
            answer = await http.post("/api/runs", json={"flow": FLOW["id"]}, headers=HEADERS)
            ids.append(answer.json()["run_id"])
        found: dict[str, list[float]] = {"read": [], "signal": [], "errors": [], "refused": []}
        sampler = sample(pid, seconds, profile) if profile else None
        before = cpu_seconds(pid)
        until = time.monotonic() + seconds
        await asyncio.gather(*(client(port, ids, until, found) for _ in range(clients)))
        after = cpu_seconds(pid)
        if sampler is not None:
            sampler.wait()
        served = (await http.get("/metrics")).text
    elapsed = time.monotonic() - until + seconds
    found["cpu"] = [(a - b) / elapsed for a, b in zip(after, before, strict=True)]
    for kind, route in (("read", "/api/runs/{run}"), ("signal", "/api/runs/{run}/signals")):
        found[f"server {kind}"] = server_latency(served, route)
    return found


def server_latency(metrics: str, route: str) -> list[float]:
    """The server's own count of requests to ``route`` and their latency (from ``/metrics``),
    from a request's arrival to its answer: [count, mean, then the bounds under which 50, 95
    and 99 % of them were answered (the histogram's buckets: an upper bound)]."""
    buckets: list[tuple[float, float]] = []
    count = total = 0.0
    for line in metrics.splitlines():
        if not line.startswith("flowtide_http_request_seconds") or f'route="{route}"' not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("flowtide_http_request_seconds_bucket"):
            bound = name.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(bound), float(value)))
        elif name.startswith("flowtide_http_request_seconds_count"):
            count = float(value)
        elif name.startswith("flowtide_http_request_seconds_sum"):
            total = float(value)
    bounds = [next(b for b, n in buckets if n >= share * count) for share in (0.5, 0.95, 0.99)]
    return [count, total / max(count, 1), *bounds]


def cpu_seconds(server: int) -> tuple[float, float, float]:
    """CPU seconds used so far by the server, by this process (the clients), and by the whole
    machine (every CPU's busy time, from ``/proc/stat``)."""
    tick = os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{server}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    served = (int(fields[11]) + int(fields[12])) / tick
    with open("/proc/stat") as f:
        times = [int(v) for v in f.readline().split()[1:]]
    busy = (sum(times) - times[3] - times[4]) / tick  # all but idle and iowait
    return served, time.process_time(), busy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--profile", metavar="FILE", help="sample the server with py-spy into FILE (collapsed)"
    )
    options = parser.parse_args()
    main(options.clients, options.seconds, options.runs, options.store, options.profile)
