"""Crash rounds with real processes: runs are started, a worker process is killed (SIGKILL) at a
seeded random instant (in a node, in a commit, in its sweeper: wherever it happens to be), and
a second worker finishes the job. Then every run is checked:

* it ended (completed): no run lost;
* its history is numbered 1, 2, 3, ... with no gap;
* each placement was visited by one token (no token duplicated), and each visit ended once
  (finished or timed out: no transition applied twice); a park ended by exactly one of a
  signal and its deadline;
* it finished once;
* every other run parks in a subflow's child: its parent started exactly one child for its
  visit, whatever was killed when, and the child passes the same checks.

Used by ``tests/crash/test_crash.py`` (a few rounds in CI) and by ``python -m
tests.crash.soak`` (as many rounds as asked).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from flowtide.authoring import FlowBuilder
from flowtide.clock import SystemClock
from flowtide.engine import Engine, RequestPending, SignalRefused
from flowtide.engine.run.children import child_run_id
from flowtide.model import Flow
from flowtide.store import EventRecord, Store
from flowtide.store.urls import open_store
from tests.crash import nodes

NODES = nodes  # (imported for the process-wide registry: the client starts runs by them)

ROOT = Path(__file__).resolve().parents[2]
LEASE = 0.5
"""The workers' lease (seconds): a killed worker's runs are taken over this soon."""


def crash_flow() -> Flow:
    return (
        FlowBuilder("urn:flowtide:test:crash")
        .task("think", "crash:think", {"done": "block"})
        .task("block", "crash:block", {"done": "ask"})
        .task("ask", "crash:wait-for-ok", {"approved": "after", "timeout": "after"})
        .task("after", "crash:think", {"done": "end"})
        .terminal("end")
        .build()
    )


def parent_flow() -> Flow:
    """The crash flow as a subflow: its child run parks, and the parent waits for it."""
    return (
        FlowBuilder("urn:flowtide:test:crash-parent")
        .subflow("sub", crash_flow(), {"success": "end"})
        .terminal("end")
        .build()
    )


def parking_run(run_id: str, flow_id: str) -> str:
    """The run that parks: the run itself, or the child a parent's subflow starts."""
    if flow_id == "urn:flowtide:test:crash":
        return run_id
    return child_run_id(run_id, f"{run_id}.1", "sub", 1, 1)


@dataclass
class Round:
    seed: int
    runs: list[str] = field(default_factory=list)
    killed_after: float = 0.0
    problems: list[str] = field(default_factory=list)


def worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    """A worker process on ``url``, with the crash nodes; what it says on stderr goes to
    ``log``."""
    command = [
        sys.executable, "-m", "flowtide", "worker", "--nodes", "tests.crash.nodes",
        "--store", url, "--lease", str(LEASE), "--poll", "0.05", "--quiet",
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "FLOWTIDE_LOG": os.environ.get("FLOWTIDE_LOG", "WARNING"),
    }
    with log.open("ab") as errors:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors
        )


async def play(
    url: str,
    seed: int,
    log: Path,
    runs: int = 12,
    patience: float = 60.0,
    *,
    workers_url: str | None = None,
    meanwhile: Callable[[random.Random], Awaitable[None]] | None = None,
) -> Round:
    """One round: ``runs`` runs, a worker killed at a seeded instant, another that finishes
    (the workers' stderr goes to ``log``). ``workers_url``: the store's URL as the workers
    reach it (default ``url``); ``meanwhile``: what else happens once the second worker is at
    work (given a random source of the round's), over before the runs are waited for."""
    rng = random.Random(seed)
    result = Round(seed)
    store = await open_store(url)
    flows = [crash_flow(), parent_flow()]
    client = Engine(store=store, clock=SystemClock(), executes=False, flows=flows)
    workers_url = workers_url or url
    first = worker(workers_url, log)
    parking: list[str] = []
    besides: asyncio.Future[None] = asyncio.ensure_future(_idle())
    try:
        for n in range(runs):
            flow = flows[n % 2].id  # (every other run parks in a subflow's child)
            handle = await client.start(flow)
            result.runs.append(handle.run_id)
            parking.append(parking_run(handle.run_id, flow))
        result.killed_after = rng.uniform(0.05, 0.8)
        signals = asyncio.ensure_future(_signal_some(client, parking, rng))
        await asyncio.sleep(result.killed_after)
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait)
        await signals
        second = worker(workers_url, log)
        try:
            if meanwhile is not None:
                await _at_work(store, second, patience)
                besides = asyncio.ensure_future(meanwhile(random.Random(f"{seed}/meanwhile")))
                await besides
            await _until_ended(store, result.runs, patience)
        finally:
            second.send_signal(signal.SIGTERM)
            try:
                # (Waited for in a thread: the loop goes on serving what the worker may need
                # to stop, such as a proxy to its database.)
                await asyncio.to_thread(second.wait, 30)
            except subprocess.TimeoutExpired:
                result.problems.append("the second worker did not stop within 30 s of SIGTERM")
                _dump(second, log)
                second.kill()
        for run_id in result.runs:
            result.problems += await check(store, run_id)
    finally:
        besides.cancel()
        if first.poll() is None:
            first.kill()
        await client.close()
        await store.close()
    return result


async def _idle() -> None:
    pass


async def _at_work(store: Store, process: subprocess.Popen[bytes], patience: float) -> None:
    """Once the worker ``process`` has recorded its heartbeat in ``store``."""
    end = time.monotonic() + patience
    while time.monotonic() < end and process.poll() is None:
        if any(w.pid == process.pid for w in await store.workers()):
            return
        await asyncio.sleep(0.05)


def _dump(process: subprocess.Popen[bytes], log: Path) -> None:
    """Where a stuck worker is, into ``log`` (if py-spy is installed)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if Path(spy).exists():
        dump = subprocess.run([spy, "dump", "--pid", str(process.pid)], capture_output=True)
        with log.open("ab") as out:
            out.write(dump.stdout + dump.stderr)


async def _signal_some(client: Engine, runs: list[str], rng: random.Random) -> None:
    """Signal about half of the runs, each at a random instant (some before their node parks,
    some after its deadline: those are refused; those sent once the worker is dead are recorded
    and applied by the next worker)."""
    chosen = [r for r in runs if rng.random() < 0.5]
    delays = sorted((rng.uniform(0.05, 1.0), r) for r in chosen)
    start = time.monotonic()
    for delay, run_id in delays:
        await asyncio.sleep(max(0.0, start + delay - time.monotonic()))
        # (Not parked yet, or expired: no change. Unanswered: recorded for the next worker.)
        with contextlib.suppress(SignalRefused, RequestPending):
            await client.signal(key=f"ok-{run_id}", payload={"ok": True}, wait=0.2)


async def _until_ended(store: Store, runs: list[str], patience: float) -> None:
    end = time.monotonic() + patience
    left = set(runs)
    while left and time.monotonic() < end:
        for run_id in list(left):
            if (await store.get_run(run_id)).lifecycle in (
                "completed",
                "failed",
                "cancelled",
                "timed_out",
            ):
                left.discard(run_id)
        await asyncio.sleep(0.05)


async def check(store: Store, run_id: str) -> list[str]:
    """What is wrong with a run after the round (nothing: an empty list)."""
    run = await store.get_run(run_id)
    history = list(await store.history(run_id))
    tokens = list(await store.tokens(run_id))
    problems = []
    if run.lifecycle != "completed":
        problems.append(f"{run_id}: lifecycle {run.lifecycle}, not completed")
    seqs = [e.seq for e in history]
    if seqs != list(range(1, len(history) + 1)):
        problems.append(f"{run_id}: history numbered {seqs}")
    per_placement = Counter(t.placement for t in tokens)
    twice = {p: n for p, n in per_placement.items() if n > 1}
    if twice:
        problems.append(f"{run_id}: placements with more than one token {twice}")
    problems += _transitions(run_id, history)
    if run.flow_id == parent_flow().id:
        children = [r.id for r in await store.list_runs() if r.parent_run_id == run_id]
        if children != [parking_run(run_id, run.flow_id)]:
            problems.append(f"{run_id}: child runs {children}, not one")
        for child in children:
            problems += await check(store, child)
    if problems:
        problems.append(f"{run_id}: history\n" + "\n".join(_line(e) for e in history))
    return problems


def _line(event: EventRecord) -> str:
    where = event.placement or ""
    return f"  {event.seq:3} {event.at.isoformat()} {event.kind} {where} {event.data}"


def _transitions(run_id: str, history: list[EventRecord]) -> list[str]:
    problems = []
    kinds = Counter(e.kind for e in history)
    if kinds["run_finished"] != 1:
        problems.append(f"{run_id}: finished {kinds['run_finished']} times")
    ended = Counter(
        (e.placement, e.data.get("visit", 1))
        for e in history
        if e.kind in ("node_finished", "node_timed_out")
    )
    again = {k: n for k, n in ended.items() if n > 1}
    if again:
        problems.append(f"{run_id}: visits ended more than once {again}")
    if kinds["signalled"] and kinds["node_timed_out"]:
        problems.append(f"{run_id}: its park was both signalled and timed out")
    if kinds["signalled"] > 1:
        problems.append(f"{run_id}: signalled {kinds['signalled']} times")
    return problems
