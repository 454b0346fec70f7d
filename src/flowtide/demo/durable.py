"""The durable scene of ``flowtide demo``: the payment example kept in a SQLite file and worked
by separate processes, one of them killed on the way.

Every actor is a ``flowtide`` command of its own, as in production: ``start`` stores the run,
``worker`` processes drive it, the gateway's and the customer's callbacks are ``signal``
commands. The payment's ten-minute window (anchored at the first try) is cut to eight seconds
so that the scene plays in real time:

1. the run is started, and worker 1 parks it at collect-payment (try 1);
2. the gateway declines; worker 1 offers the customer a retry;
3. worker 1 is killed (SIGKILL) while the customer decides; nothing of the run is lost;
4. the customer retries, with no worker alive: the retry is recorded in the file (exit 4);
5. worker 2 starts, takes the run, and asks the gateway again (try 2);
6. eight seconds after the first try the window ends, whatever the retries: ``expired``;
7. the gateway's late 'paid' for try 2 is refused: the window had expired.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from flowtide.documents import load_flow
from flowtide.model.flow import Flow
from flowtide.store.base import ENDED_LIFECYCLES, RunRecord, Store
from flowtide.store.urls import open_store

__all__ = ["DurableScene", "Step", "play_durable"]

WINDOW = 8.0
"""The payment window of the scene, in seconds (ten minutes in the example)."""

NODES = "flowtide.demo.checkout"

PATIENCE = 60.0
"""Seconds the scene waits for one thing a process does (a worker's answer to a callback, a
park): each ends as soon as it is done, at once on an idle machine; a busy one can take seconds
to start or wake a process."""


@dataclass
class Step:
    """One thing that happened: ``at`` seconds after the run started, by ``who``."""

    at: float
    who: str
    what: str


@dataclass
class DurableScene:
    store: str
    run_id: str = ""
    steps: list[Step] = field(default_factory=list)
    outcome: str | None = None
    lifecycle: str | None = None
    refused: str | None = None
    """Why the late callback was refused (None: it was accepted, which would be wrong)."""


def shortened(example: Path, window: float = WINDOW) -> Flow:
    """The node-anchored payment example, its window cut to ``window`` seconds."""
    flow = load_flow(example)
    data = flow.to_data()
    for placement in data["placements"]:
        if placement["id"] == "collect-payment":
            placement["settings"]["timeout"] = f"PT{window:g}S"
    data["id"] = "urn:flowtide:example:checkout-durable"
    return Flow.model_validate(data)


def play_durable(example: Path, folder: Path, window: float = WINDOW) -> DurableScene:
    """Play the scene in ``folder`` (its SQLite file, its flow, the workers' logs), the payment
    window ``window`` seconds long: it must outlast three ``flowtide`` processes starting one
    after another and worker 1's lease, or worker 2 finds it ended (a busy machine needs more)."""
    flow_file = folder / "checkout-durable.yaml"
    flow_file.write_text(yaml.safe_dump(shortened(example, window).to_data(), sort_keys=False))
    scene = DurableScene(f"sqlite:///{folder / 'payments.db'}")
    actors = _Actors(scene.store, folder)
    began = time.monotonic()

    def note(who: str, what: str) -> None:
        scene.steps.append(Step(time.monotonic() - began, who, what))

    started = actors.command("start", str(flow_file), "--nodes", NODES)
    scene.run_id = started["run_id"]
    began = time.monotonic()
    note("flowtide start", f"run {scene.run_id[:8]} stored in payments.db")
    first = actors.worker("worker 1")
    _story(scene, actors, first, note, window)
    scene.steps.sort(key=lambda s: s.at)
    return scene


def _story(
    scene: DurableScene,
    actors: _Actors,
    first: subprocess.Popen[bytes],
    note: Callable[[str, str], None],
    window: float,
) -> None:
    run = scene.run_id
    try:
        actors.until_parked(run, f"charge-{run}-1")
        note("worker 1", "collect-payment asks the gateway (try 1) and parks")
        actors.signal(f"charge-{run}-1", '{"gateway":"declined"}')
        note("gateway", "declined (a signal from another process)")
        actors.until_parked(run, f"customer-{run}")
        note("worker 1", "offer-retry parks: the customer decides")
        first.send_signal(signal.SIGKILL)
        first.wait()
        note("kill -9", "worker 1 is killed; the run stays in payments.db")
        actors.signal(f"customer-{run}", '{"choice":"retry"}', pending=True)
        note("customer", "retry (no worker alive: recorded in the file, for the next worker)")
        actors.worker("worker 2")
        actors.until_parked(run, f"charge-{run}-2")
        note("worker 2", "takes the run; collect-payment asks the gateway again (try 2)")
        record = actors.until_ended(run, patience=window + PATIENCE)
        scene.lifecycle, scene.outcome = record.lifecycle, record.outcome
        note("worker 2", f"the window ends {window:g} s after the first try: {scene.outcome}")
        late = actors.signal(f"charge-{run}-2", '{"gateway":"paid"}', refused=True)
        scene.refused = late.get("reason")
        note("gateway", f"paid, too late: refused ({scene.refused})")
    finally:
        actors.stop()


class _Actors:
    """The scene's processes: ``flowtide`` commands on one store."""

    def __init__(self, store: str, folder: Path) -> None:
        self.store = store
        self.folder = folder
        self.workers: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def command(self, *args: str, allowed: tuple[int, ...] = (0,)) -> dict[str, Any]:
        """Run ``flowtide ARGS --store ... --json``; its JSON answer (its exit code one of
        ``allowed``)."""
        argv = [sys.executable, "-m", "flowtide", *args, "--store", self.store, "--json"]
        limit = PATIENCE + 60
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=limit)
        if done.returncode not in allowed:
            said = (done.stderr.strip() or done.stdout.strip())[-500:]
            raise RuntimeError(f"flowtide {args[0]} exited with {done.returncode}: {said}")
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def signal(
        self, key: str, payload: str, *, refused: bool = False, pending: bool = False
    ) -> dict[str, Any]:
        """``flowtide signal --key KEY --payload PAYLOAD``, as a callback would send it (no
        node code needed): ``refused`` allows exit 3, ``pending`` returns once it is recorded
        (exit 4: no worker is alive to answer)."""
        args = ["signal", "--key", key, "--payload", payload]
        if pending:
            return self.command(*args, "--wait", "0", allowed=(4,))
        waiting = ("--wait", f"{PATIENCE:g}")
        return self.command(*args, *waiting, allowed=(0, 3) if refused else (0,))

    def worker(self, name: str) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, "-m", "flowtide", "worker", "--nodes", NODES,
            "--store", self.store, "--lease", "2", "--poll", "0.05", "--quiet",
        ]  # fmt: skip
        with (self.folder / f"{name.replace(' ', '-')}.log").open("ab") as log:
            process = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        self.workers.append(process)
        return process

    def until_parked(self, run: str, key: str, patience: float = PATIENCE) -> None:
        """Once ``run`` has an open park with ``key`` (read from the file, as ``flowtide show``
        would, without a process of its own)."""

        async def parked(store: Store) -> bool:
            if any(p.key == key for p in await store.parks(run_id=run, open_only=True)):
                return True
            if (await store.get_run(run)).lifecycle in ENDED_LIFECYCLES:
                raise RuntimeError(f"run {run} ended before it parked as {key}: window too short")
            return False

        if not asyncio.run(self._until(parked, patience)):
            raise RuntimeError(f"run {run} did not park as {key} within {patience:g} s")

    def until_ended(self, run: str, patience: float = PATIENCE) -> RunRecord:
        async def ended(store: Store) -> bool:
            return (await store.get_run(run)).lifecycle in ENDED_LIFECYCLES

        async def record() -> RunRecord:
            async with await open_store(self.store) as store:
                return await store.get_run(run)

        if not asyncio.run(self._until(ended, patience)):
            raise RuntimeError(f"run {run} did not end within {patience:g} s")
        return asyncio.run(record())

    async def _until(self, done: Callable[[Store], Awaitable[bool]], patience: float) -> bool:
        async with await open_store(self.store) as store:
            end = time.monotonic() + patience
            while time.monotonic() < end:
                if await done(store):
                    return True
                await asyncio.sleep(0.05)
        return False

    def stop(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
