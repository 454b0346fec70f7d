"""The sweeper: one atomic path for signals, timeouts, timers and cancels; batches; wake-ups."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, SignalReceipt, SignalRefused
from flowtide.model import Flow
from flowtide.store import Commit, MemoryStore, Store
from tests.engine.engine_helpers import T0, at, fresh_store, kinds, of_kind, running


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


class YieldingStore(MemoryStore):
    """A memory store that lets other tasks run before each read and commit (as a database
    store would), so that a signal's and a firing's reads and commits interleave."""

    async def get_run(self, run_id: str) -> Any:
        await asyncio.sleep(0)
        return await super().get_run(run_id)

    async def tokens(self, run_id: str, statuses: Any = None) -> Any:
        await asyncio.sleep(0)
        return await super().tokens(run_id, statuses)

    async def get_state(self, run_id: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return await super().get_state(run_id)

    async def commit(self, commit: Commit) -> Any:
        await asyncio.sleep(0)
        return await super().commit(commit)


async def yields(rng: random.Random, most: int = 3) -> None:
    for _ in range(rng.randrange(most + 1)):
        await asyncio.sleep(0)


async def one_race(
    rng: random.Random,
    order: int,
    *,
    two_engines: bool,
    store: Store | None = None,
    turns: int = 3,
) -> str:
    """A signal sent 1 µs before the deadline races the sweeper firing the deadline.

    The sweeper is stopped and its firing path is run by hand with the runs claimed at the
    deadline (as the sweeper of a process whose clock already reads 10 s would), each side
    after a random number of loop turns (up to ``turns``), in both orders. ``store``: a fresh
    memory store by default.
    """
    clock = VirtualClock(T0)
    store = store if store is not None else MemoryStore()
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
            await yields(rng, turns)
            try:
                outcome["signal"] = await b.signal(run_id, placement="w", output="approved")
            except SignalRefused as exc:
                outcome["refused"] = exc

        async def sweep() -> None:
            await yields(rng, turns)
            leases = await store.claim_runs(a.owner, at(10), at(40))
            await a.taking.take(leases, at(10))

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
        assert list(await store.due_of(run_id)) == []
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


@pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)
async def test_the_store_decides_the_race_between_two_engines() -> None:
    # Two engines on one store (as two processes would be): each rebuilds the run in its own
    # memory, so only the store's compare-and-set can decide.
    rng = random.Random(11)
    store = fresh_store()
    try:
        # (Up to 3,000 loop turns before each side: a database's round trips take several.)
        winners = [
            await one_race(rng, i % 2, two_engines=True, store=store, turns=3000)
            for i in range(100)
        ]
    finally:
        await store.close()
    assert set(winners) == {"signal", "timeout"}


@pytest.mark.parametrize("two_engines", [False, True], ids=["one engine", "two engines"])
async def test_a_signal_and_a_timeout_racing_on_a_store_that_yields_exactly_one_wins(
    two_engines: bool,
) -> None:
    # Each read and commit of either side lets the other side run in between.
    rng = random.Random(5)
    winners = [
        await one_race(rng, i % 2, two_engines=two_engines, store=YieldingStore(), turns=5)
        for i in range(200)
    ]
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
        assert engine.held_runs() == []  # all let go
        await clock.advance(timedelta(seconds=10))
        results = [await engine.wait(r) for r in runs]
        stats = engine.sweeper.statistics()
    assert {r.outcome for r in results} == {"late"}
    assert stats.claimed == 1200
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
        # (Given back parked, the run's wake instant moved later: from its lease's expiry to its
        # timeout. The sweeper, armed for the expiry if it had looked while the run was held,
        # is not woken for that: it looks again then.)
        assert engine.sweeper.statistics().armed_for in (at(30), at(3600))
        fast = await engine.run(race_flow())
        await clock.settle()
        assert engine.sweeper.statistics().armed_for == at(10)
        await clock.advance(timedelta(seconds=10))
        assert (await engine.wait(fast.run_id)).outcome == "late"
        assert (await engine.store.get_run(slow.run_id)).lifecycle == "parked"


async def test_a_cancel_racing_a_signal_that_ends_the_run_on_a_store_that_yields() -> None:
    # The signal's output ends the run; the cancel comes after 0 to 49 loop turns, while the
    # signal reads and commits (each read and commit yields). The run ends once, as the answers
    # say: cancel() is False only if the signal ended it first.
    flow = race_flow()
    seen = set()
    for turns in range(50):
        clock = VirtualClock(T0)
        engine = Engine(clock=clock, store=YieldingStore(), flows=[flow])
        try:
            run_id = (await engine.run(flow)).run_id
            signal = asyncio.ensure_future(engine.signal(run_id, placement="w", output="approved"))
            for _ in range(turns):
                await asyncio.sleep(0)
            cancelled = await engine.cancel(run_id)
            try:
                answer: SignalReceipt | SignalRefused = await signal
            except SignalRefused as exc:
                answer = exc
            result = await engine.wait(run_id)
            history = await engine.history(run_id)
            assert kinds(history).count("run_finished") == 1
            assert (await engine.store.get_run(run_id)).lifecycle == result.lifecycle
            if not cancelled:
                assert isinstance(answer, SignalReceipt) and answer.output == "approved"
                assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "approved"
                seen.add("signal")
            else:
                assert result.lifecycle is Lifecycle.CANCELLED
                if isinstance(answer, SignalRefused):
                    assert answer.reason == "cancelled"
                    assert of_kind(history, "signalled") == []
                seen.add("cancel")
        finally:
            await engine.close()
    assert seen == {"signal", "cancel"}
