"""The sweeper: one atomic path for signals, timeouts, timers and cancels; batches; wake-ups."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, SignalRefused
from flowtide.model import Flow
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import T0, at, kinds, of_kind, running


@node(outputs=["approved"], timeout="PT10S", register=False)
async def wait_for_ok(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


def race_flow() -> Flow:
    return (
        FlowBuilder("urn:test:flow:race")
        .task("w", wait_for_ok, {"approved": "yes", "timeout": "late"})
        .terminal("yes", "approved")
        .terminal("late", "late")
        .build()
    )


async def yields(rng: random.Random) -> None:
    for _ in range(rng.randrange(4)):
        await asyncio.sleep(0)


async def one_race(rng: random.Random, order: int, *, two_engines: bool) -> str:
    """A signal sent 1 µs before the deadline races the sweeper firing the deadline.

    The sweeper is stopped and its firing path is run by hand with the due entries claimed at
    the deadline (as the sweeper of a process whose clock already reads 10 s would), each side
    after a random number of loop turns, in both orders.
    """
    clock = VirtualClock(T0)
    store = MemoryStore()
    flow = race_flow()
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow]) if two_engines else a
    try:
        first = await a.run(flow)
        run_id = first.run_id
        await a.sweeper.close()
        await clock.advance_to(at(10) - timedelta(microseconds=1))
        outcome: dict[str, Any] = {}

        async def signal() -> None:
            await yields(rng)
            try:
                outcome["signal"] = await b.signal(run_id, placement="w", output="approved")
            except SignalRefused as exc:
                outcome["refused"] = exc

        async def sweep() -> None:
            await yields(rng)
            due = await store.claim_due(at(10))
            await a._fire_batch(due)

        tasks = [signal(), sweep()] if order == 0 else [sweep(), signal()]
        await asyncio.gather(*tasks)
        await clock.advance(timedelta(seconds=1))
        result = await a.wait(run_id)
        history = await a.history(run_id)
        signalled = of_kind(history, "signalled")
        timed_out = of_kind(history, "node_timed_out")
        # Exactly one of them won, and the history, the result and the answer agree.
        assert len(signalled) + len(timed_out) == 1
        assert kinds(history).count("run_finished") == 1
        assert store.due_entries() == []
        if signalled:
            assert result.outcome == "approved" and "signal" in outcome
            return "signal"
        assert result.outcome == "late" and outcome["refused"].reason == "expired"
        return "timeout"
    finally:
        await a.close()
        if b is not a:
            await b.close()


async def test_a_signal_and_a_timeout_racing_at_the_same_instant_exactly_one_wins() -> None:
    rng = random.Random(7)
    winners = [await one_race(rng, i % 2, two_engines=False) for i in range(200)]
    assert set(winners) == {"signal", "timeout"}


async def test_the_store_decides_the_race_between_two_engines() -> None:
    # Two engines on one store (as two processes would be): each rebuilds the run in its own
    # memory, so only the store's compare-and-set can decide.
    rng = random.Random(11)
    winners = [await one_race(rng, i % 2, two_engines=True) for i in range(200)]
    assert set(winners) == {"signal", "timeout"}


async def test_a_cancel_and_a_signal_exactly_one_wins() -> None:
    rng = random.Random(3)
    seen = set()
    for i in range(100):
        async with running(autojump=False) as (engine, _clock):
            first = await engine.run(race_flow())
            got: dict[str, Any] = {}

            async def signal(run_id: str = first.run_id, got: dict[str, Any] = got) -> None:
                await yields(rng)
                try:
                    got["ok"] = await engine.signal(run_id, placement="w", output="approved")
                except SignalRefused as exc:
                    got["refused"] = exc

            async def cancel(run_id: str = first.run_id) -> None:
                await yields(rng)
                await engine.cancel(run_id)

            pair = [signal(), cancel()] if i % 2 else [cancel(), signal()]
            await asyncio.gather(*pair)
            result = await engine.wait(first.run_id)
            history = await engine.history(first.run_id)
        if "ok" in got:
            assert result.lifecycle in (Lifecycle.COMPLETED, Lifecycle.CANCELLED)
            assert len(of_kind(history, "signalled")) == 1
            seen.add("signal")
        else:
            assert got["refused"].reason == "cancelled"
            assert result.lifecycle is Lifecycle.CANCELLED
            assert of_kind(history, "signalled") == []
            seen.add("cancel")
    assert seen == {"signal", "cancel"}


async def test_many_parked_runs_fire_in_batches_at_their_deadlines() -> None:
    async with running(autojump=False) as (engine, clock):
        flow = race_flow()
        runs = [(await engine.run(flow)).run_id for _ in range(1200)]
        assert engine._runs == {}  # all let go
        await clock.advance(timedelta(seconds=10))
        results = [await engine.wait(r) for r in runs]
        stats = engine.sweeper.statistics()
    assert {r.outcome for r in results} == {"late"}
    assert stats.fired == 1200
    assert stats.batches >= 3  # claimed in batches, not one by one nor all at once


@node(outputs=["approved"], register=False)
async def long_wait(ctx: NodeContext) -> Any:
    return Park()


async def test_the_sweeper_wakes_early_for_a_nearer_deadline() -> None:
    far = (
        FlowBuilder("urn:test:flow:far")
        .task("w", long_wait, {"approved": "yes", "timeout": "late"}, timeout="PT1H")
        .terminal("yes")
        .terminal("late", "late")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        slow = await engine.run(far)
        await clock.settle()  # run() may return before the sweeper's task first ran
        assert engine.sweeper.statistics().armed_for == at(3600)
        fast = await engine.run(race_flow())
        await clock.settle()
        assert engine.sweeper.statistics().armed_for == at(10)
        await clock.advance(timedelta(seconds=10))
        assert (await engine.wait(fast.run_id)).outcome == "late"
        assert (await engine.store.get_run(slow.run_id)).lifecycle == "parked"
