"""Two workers waking the same parked run at once, on every store: each rebuilds the run from a
snapshot in which nobody holds it, and each wake's commit takes the run's lease (see
``Commit.take``). The store lets one of them take it; the other's commit changes nothing, and
its signal is not lost: it finds the run held and records a request, which the winner applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, SignalRefused
from flowtide.engine.errors import RefusalReason
from flowtide.model import Flow
from flowtide.store import Commit, LeaseLost, Store
from tests.engine.engine_helpers import T0, fresh_store

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

ROUNDS = 20


@node(outputs=["go"])
async def fork(ctx: NodeContext) -> Any:
    return "go"


@node(outputs=["done"])
async def gate(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=None)
    return "done"


def two_gates() -> Flow:
    return (
        FlowBuilder("urn:test:flow:wake-race")
        .task("fork", fork, {"go": ["left", "right"]})
        .task("left", gate, {"done": "j"})
        .task("right", gate, {"done": "j"})
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .build()
    )


def count_lost_takes(store: Store) -> list[int]:
    """A counter (one item) of the commits ``store`` refuses with LeaseLost from now on."""
    lost = [0]
    commit: Callable[[Commit], Awaitable[Any]] = store.commit

    async def counted(c: Commit) -> Any:
        try:
            return await commit(c)
        except LeaseLost:
            if c.take is not None:
                lost[0] += 1
            raise

    store.commit = counted  # type: ignore[method-assign,assignment]
    return lost


async def two_workers(flow: Flow) -> tuple[Engine, Engine, Store, VirtualClock]:
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    one = Engine(clock=clock, store=store, owner="one", flows=[flow])
    two = Engine(clock=clock, store=store, owner="two", flows=[flow])
    return one, two, store, clock


async def close(one: Engine, two: Engine, store: Store, clock: VirtualClock) -> None:
    await one.close()
    await two.close()
    await clock.aclose()
    await store.close()


async def test_two_workers_waking_one_run_lose_no_signal() -> None:
    flow = two_gates()
    one, two, store, clock = await two_workers(flow)
    lost = count_lost_takes(store)
    try:
        for n in range(ROUNDS):
            parked = await one.run(flow)
            assert parked.lifecycle is Lifecycle.PARKED and not one.held_runs()
            run_id = parked.run_id
            first, second = (one, two) if n % 2 else (two, one)
            await asyncio.gather(
                first.signal(run_id, placement="left", payload={"left": n}),
                second.signal(run_id, placement="right", payload={"right": n}),
            )
            result = await one.wait(run_id)
            assert result.lifecycle is Lifecycle.COMPLETED, result
            assert result.state == {"left": n, "right": n}
            history = await one.history(run_id)
            signalled = [e.placement or "" for e in history if e.kind == "signalled"]
            assert sorted(signalled) == ["left", "right"]
            assert [e.kind for e in history].count("run_finished") == 1
    finally:
        await close(one, two, store, clock)
    assert lost[0] > 0  # (the race was run: a take lost, nothing changed by it)


async def test_two_workers_signalling_one_park_have_one_winner() -> None:
    flow = two_gates()
    one, two, store, clock = await two_workers(flow)
    try:
        for n in range(ROUNDS):
            parked = await one.run(flow)
            run_id = parked.run_id
            first, second = (one, two) if n % 2 else (two, one)
            answers = await asyncio.gather(
                first.signal(run_id, placement="left", payload={"by": "first"}),
                second.signal(run_id, placement="left", payload={"by": "second"}),
                return_exceptions=True,
            )
            refused = [a for a in answers if isinstance(a, SignalRefused)]
            assert len(refused) == 1, answers
            assert refused[0].reason in (RefusalReason.MOVED_ON, RefusalReason.NOT_PARKED)
            await one.signal(run_id, placement="right")
            result = await one.wait(run_id)
            assert result.lifecycle is Lifecycle.COMPLETED, result
            winner = "first" if answers[0] is not refused[0] else "second"
            assert result.state == {"by": winner}
            history = await one.history(run_id)
            assert [e.placement for e in history if e.kind == "signalled"] == ["left", "right"]
    finally:
        await close(one, two, store, clock)
