"""Signals racing their deadlines, with real worker processes (each the sweeper of the runs it
may take) on one store: every run must be moved by exactly one of them, the signal's answer must
say which, and the instant the store recorded the signal decides: accepted if and only if it
was recorded before the park's deadline.

Runs park with a 1.5 s window, ``batch`` at a time; each is signalled close to its deadline (its
request recorded from 50 ms before to 50 ms after it, seeded), while the workers' sweepers fire
the same deadlines. Used by ``tests/crash/test_race.py`` (1,000 tries on SQLite and on
PostgreSQL) and ``python -m tests.crash.soak --race`` (as many as asked).
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from flowtide.authoring import FlowBuilder
from flowtide.clock import SystemClock
from flowtide.engine import Engine, SignalRefused
from flowtide.model import Flow
from flowtide.store import SignalRequest, Store
from flowtide.store.urls import open_store
from tests.crash.harness import NODES, worker

__all__ = ["NODES", "Race", "race"]


def race_flow() -> Flow:
    return (
        FlowBuilder("urn:flowtide:test:race")
        .task("ask", "crash:await-answer", {"answered": "ok", "timeout": "late"})
        .terminal("ok", "answered")
        .terminal("late", "late")
        .build()
    )


@dataclass
class Race:
    seed: int
    tries: int = 0
    signal_won: int = 0
    deadline_won: int = 0
    problems: list[str] = field(default_factory=list)


async def race(
    url: str, seed: int, log: Path, tries: int = 1000, workers: int = 3, batch: int = 50
) -> Race:
    """``tries`` races, ``batch`` runs at a time, against ``workers`` worker processes."""
    rng = random.Random(seed)
    result = Race(seed, tries)
    store = await open_store(url)
    recorded = _recording(store)
    client = Engine(store=store, clock=SystemClock(), executes=False, flows=[race_flow()])
    processes = [worker(url, log) for _ in range(workers)]
    try:
        for first in range(0, tries, batch):
            count = min(batch, tries - first)
            runs = [(await client.start("urn:flowtide:test:race")).run_id for _ in range(count)]
            deadlines = await _deadlines(store, runs, STALL)
            answers = await _signal_at_deadlines(client, deadlines, rng)
            await _until_ended(store, runs, STALL)
            for run_id in runs:
                if run_id not in deadlines:
                    result.problems.append(await _unparked(store, run_id))
                    continue
                accepted = answers.get(run_id)
                result.problems += await _check(store, run_id, accepted, result)
                result.problems += _judged(run_id, accepted, recorded, deadlines)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)
        await client.close()
        await store.close()
    return result


STALL = 120.0
"""Seconds in which no run of a batch moves on (parks, or ends) after which the race stops
waiting for the rest: the wait lasts as long as the workers make progress, however loaded the
machine is."""


async def _deadlines(store: Store, runs: list[str], stall: float) -> dict[str, datetime]:
    """Each run's park deadline, once every run has parked (or none has for ``stall``
    seconds: those are missing)."""
    found: dict[str, datetime] = {}
    last = time.monotonic()
    while len(found) < len(runs) and time.monotonic() - last < stall:
        for run_id in runs:
            if run_id not in found:
                parks = await store.parks(run_id=run_id)
                if parks and parks[0].deadline is not None:
                    found[run_id] = parks[0].deadline
                    last = time.monotonic()
        await asyncio.sleep(0.02)
    return found


async def _unparked(store: Store, run_id: str) -> str:
    """What is known of a run that had not parked when the race stopped waiting (it was not
    signalled)."""
    run = await store.get_run(run_id)
    kinds = Counter(e.kind for e in await store.history(run_id))
    return (
        f"{run_id}: did not park in time (no run of its batch parked for {STALL:g} s), so it "
        f"was not signalled; now {run.lifecycle}, its history {dict(kinds)}"
    )


async def _signal_at_deadlines(
    client: Engine, deadlines: dict[str, datetime], rng: random.Random
) -> dict[str, bool]:
    """Signal each run close to its deadline; run id -> accepted."""
    answers: dict[str, bool] = {}

    async def one(run_id: str, at: datetime) -> None:
        delay = (at - datetime.now(UTC)).total_seconds() + rng.uniform(-0.05, 0.05)
        await asyncio.sleep(max(0.0, delay))
        try:
            await client.signal(key=f"answer-{run_id}", payload={"by": "race"}, wait=None)
            answers[run_id] = True
        except SignalRefused:
            answers[run_id] = False

    await asyncio.gather(*(one(run_id, at) for run_id, at in deadlines.items()))
    return answers


def _recording(store: Store) -> dict[str, SignalRequest]:
    """The requests recorded through ``store`` from now on, as stored, by run id."""
    recorded: dict[str, SignalRequest] = {}
    request_signal = store.request_signal

    async def recording(request: SignalRequest) -> SignalRequest:
        stored = await request_signal(request)
        recorded[stored.run_id] = stored
        return stored

    store.request_signal = recording  # type: ignore[method-assign]
    return recorded


def _judged(
    run_id: str,
    accepted: bool | None,
    recorded: dict[str, SignalRequest],
    deadlines: dict[str, datetime],
) -> list[str]:
    """The signal's answer agrees with the instant the store recorded it."""
    request, deadline = recorded.get(run_id), deadlines[run_id]
    if accepted is None:
        return []  # (said by _check)
    if request is None:
        # (A signal that finds the park timed out already is refused before anything is
        # recorded.)
        return [] if accepted is False else [f"{run_id}: accepted with no request recorded"]
    if accepted != (request.requested_at < deadline):
        said = "accepted" if accepted else "refused"
        return [
            f"{run_id}: {said}, but recorded at {request.requested_at.isoformat()} for the "
            f"deadline {deadline.isoformat()}"
        ]
    return []


async def _until_ended(store: Store, runs: list[str], stall: float) -> None:
    """Once every run has completed, or none has for ``stall`` seconds."""
    last = time.monotonic()
    left = set(runs)
    while left and time.monotonic() - last < stall:
        for run_id in list(left):
            if (await store.get_run(run_id)).lifecycle == "completed":
                left.discard(run_id)
                last = time.monotonic()
        await asyncio.sleep(0.05)


async def _check(store: Store, run_id: str, accepted: bool | None, result: Race) -> list[str]:
    history = await store.history(run_id)
    kinds = Counter(e.kind for e in history)
    run = await store.get_run(run_id)
    signalled, timed_out = kinds["signalled"], kinds["node_timed_out"]
    if run.lifecycle != "completed":
        return [f"{run_id}: {run.lifecycle}, not completed"]
    if signalled + timed_out != 1:
        return [f"{run_id}: signalled {signalled} and timed out {timed_out} times"]
    if accepted is None:
        return [f"{run_id}: parked, but its signal got no answer"]
    if accepted != bool(signalled):
        said = "accepted" if accepted else "refused"
        return [f"{run_id}: the signal was {said}, but the history says otherwise"]
    if kinds["run_finished"] != 1:
        return [f"{run_id}: finished {kinds['run_finished']} times"]
    if accepted:
        result.signal_won += 1
    else:
        result.deadline_won += 1
    return []
