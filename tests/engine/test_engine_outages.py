"""A store that stops answering for a while, at seeded random instants, while workers run,
park, resume and end runs (subflows whose child parks, scatters of child runs): no run ends
failed, none is lost, nothing is applied twice. Every store call fails while the store is down (a
:class:`~flowtide.store.StoreDown`, as PostgreSQL's store raises when it cannot be reached or
has no connection to give), reads as well as commits. In the rounds that lose answers, some
commits are applied and their answer is lost (a
:class:`~flowtide.store.CommitOutcomeUnknown`, as when PostgreSQL's connection breaks once
``COMMIT`` is sent): none may be applied again."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, NodeContext, Park, RequestPending, SignalRefused
from flowtide.engine.run.children import child_run_id
from flowtide.model import Flow
from flowtide.store import CommitOutcomeUnknown, MemoryStore, RunRecord, Store, StoreDown
from flowtide.store.base import ENDED_LIFECYCLES
from tests.engine.engine_helpers import T0

T = TypeVar("T")

ROUNDS = 40
RUNS = 9


class Outages:
    """Makes every coroutine method of a store fail with :class:`StoreDown` while ``down``."""

    def __init__(self, store: Store, rng: random.Random, lost_answers: float = 0.0) -> None:
        self.down = False
        self.refused = 0
        self.lost = 0
        self._rng = rng
        self._lost_answers = lost_answers
        """How often a commit is applied, and its answer lost, while the store is up."""
        for name, method in inspect.getmembers(store, inspect.iscoroutinefunction):
            if not name.startswith("_") and name not in ("close", "open"):
                setattr(store, name, self._guarded(name, method))

    def _guarded(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            if self.down:
                self.refused += 1
                raise StoreDown(f"the store does not answer ({name})")
            answer = await method(*args, **kwargs)
            if name == "commit" and self._rng.random() < self._lost_answers:
                self.lost += 1
                raise CommitOutcomeUnknown("the store was lost once the commit was sent")
            return answer

        return guarded


@node(id="outage:think", outputs=["done"])
async def think(ctx: NodeContext) -> str:
    spread = zlib.crc32(ctx.idempotency_key.encode()) % 500  # (the same in every process)
    await ctx.clock.sleep(timedelta(milliseconds=10 + spread))
    return "done"


@node(id="outage:wait-for-ok", outputs=["approved"], timeout="PT0.3S")
async def wait_for_ok(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    return Park(key=f"ok-{ctx.run_id}")


def parking_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:outage")
        .task("think", "outage:think", {"done": "ask"})
        .task("ask", "outage:wait-for-ok", {"approved": "after", "timeout": "after"})
        .task("after", "outage:think", {"done": "end"})
        .terminal("end")
        .build()
    )


def parent_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:outage-parent")
        .subflow("sub", parking_flow(), {"success": "end"})
        .terminal("end")
        .build()
    )


def item_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:outage-item")
        .task("think", "outage:think", {"done": "end"})
        .terminal("end")
        .build()
    )


def scatter_flow() -> Flow:
    """A child run for each of its items; an item lost or failed fails the run."""
    lost = {"partial": "lost", "all-error": "lost", "empty": "lost"}
    return (
        FlowBuilder("urn:test:flow:outage-scatter")
        .scatter("each", "items", item_flow(), {"all-success": "end", **lost}, concurrency=2)
        .terminal("end")
        .terminal("lost", "failed")
        .build()
    )


ITEMS = [1, 2, 3, 4]


def parking_run(run_id: str, flow_id: str) -> str | None:
    """The run that parks: the run itself, a parent's subflow child, or none (a scatter)."""
    if flow_id == parking_flow().id:
        return run_id
    if flow_id == parent_flow().id:
        return child_run_id(run_id, f"{run_id}.1", "sub", 1, 1)
    return None


async def _outages(clock: VirtualClock, outages: Outages, rng: random.Random) -> None:
    """Down and up again for a few seconds: up for up to half a second at a time, down for
    hundredths of a second to a few seconds."""
    end = clock.now() + timedelta(seconds=8)
    while clock.now() < end:
        await clock.sleep(timedelta(seconds=rng.uniform(0.0, 0.5)))
        outages.down = True
        await clock.sleep(timedelta(seconds=rng.choice([0.01, 0.1, 0.5, 2.0, 4.0])))
        outages.down = False


async def _signal_some(
    clock: VirtualClock, client: Engine, runs: list[str], rng: random.Random
) -> None:
    for run_id in runs:
        if rng.random() < 0.5:
            await clock.sleep(timedelta(seconds=rng.uniform(0.0, 0.3)))
            with contextlib.suppress(SignalRefused, RequestPending, StoreDown):
                await client.signal(key=f"ok-{run_id}", payload={}, wait=0.2)


async def _ended(clock: VirtualClock, store: Store, run_id: str, limit: timedelta) -> RunRecord:
    """The run as the store holds it once it has ended, or as it is once ``limit`` has passed
    on ``clock``. (The store is read on the clock, not waited on: a caller's wait looks again on
    the loop's own time, which a clock jumping ahead does not wait for.)"""
    end = clock.now() + limit
    while (run := await store.get_run(run_id)).lifecycle not in ENDED_LIFECYCLES:
        if clock.now() >= end:
            break
        await clock.sleep(timedelta(milliseconds=500))
    return run


async def a_round(seed: int, lost_answers: float = 0.0) -> list[str]:
    """What went wrong in one round (nothing: an empty list). ``lost_answers``: how often a
    commit's answer is lost once it is applied (a child's last commit's among them: its
    parent is woken all the same)."""
    rng = random.Random(seed)
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    flows = [parking_flow(), parent_flow(), scatter_flow(), item_flow()]
    client = Engine(store=store, clock=clock, flows=flows, executes=False)
    started: list[tuple[str, str]] = []
    for n in range(RUNS):  # (started before the store goes down: a client's start may fail)
        flow = flows[n % 3].id
        run_id = uuid.UUID(int=rng.getrandbits(128)).hex  # (a round is the same every time)
        started.append(((await client.start(flow, {"items": ITEMS}, run_id=run_id)).run_id, flow))
    outages = Outages(store, random.Random(seed + 1), lost_answers)
    workers = [
        Engine(store=store, clock=clock, flows=flows, owner=f"w{i}", poll=0.05) for i in (1, 2)
    ]
    problems: list[str] = []
    try:
        for w in workers:
            w.sweeper  # noqa: B018 - the workers take the runs from now on
        parking = [p for run_id, flow in started if (p := parking_run(run_id, flow))]
        await asyncio.gather(
            _outages(clock, outages, rng), _signal_some(clock, client, parking, rng)
        )
        outages.down = False
        for run_id, _ in started:
            run = await _ended(clock, store, run_id, timedelta(minutes=2))
            if run.lifecycle not in ENDED_LIFECYCLES:
                problems.append(f"{run_id}: {run.lifecycle} after two minutes")
            elif run.lifecycle != "completed":
                problems.append(f"{run_id}: {run.lifecycle} {run.result}")
        for run_id, flow in started:
            for each in {run_id, parking_run(run_id, flow) or run_id}:
                history = await store.history(each)
                kinds = Counter(e.kind for e in history)
                if kinds["run_finished"] != 1 or kinds["signalled"] + kinds["node_timed_out"] > 1:
                    problems.append(f"{each}: {dict(kinds)}")
                ended = Counter(
                    (e.placement, e.data.get("visit", 1))
                    for e in history
                    if e.kind in ("node_finished", "node_timed_out")
                )
                if again := {k: n for k, n in ended.items() if n > 1}:
                    problems.append(f"{each}: visits ended more than once {again}")
                if [e.seq for e in history] != list(range(1, len(history) + 1)):
                    problems.append(f"{each}: history numbered with gaps")
    finally:
        for w in workers:
            await w.close()
        await client.close()
        await clock.aclose()
    assert outages.refused > 0 or not problems
    return problems


@pytest.mark.parametrize("seed", range(ROUNDS))
async def test_a_store_down_for_a_while_fails_no_run(seed: int) -> None:
    assert await a_round(seed) == []


@pytest.mark.parametrize("seed", range(ROUNDS))
async def test_a_commit_whose_answer_is_lost_is_not_applied_again(seed: int) -> None:
    assert await a_round(seed, lost_answers=0.1) == []
