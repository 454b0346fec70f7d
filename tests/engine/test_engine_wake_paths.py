"""What a worker's own signal or cancel of a run nobody holds costs the store, what waiting for
a run's end costs, and the races of a worker's own cancel or signal against another actor.

A worker that cancels a run parked in the store, held by nobody, reads its snapshot once and
writes one transaction: the run's lease taken, its leftover tokens cancelled and its end, all
together. A signal with an idempotency key that wakes such a run reads only its snapshot (a
repeat is refused by the wake's commit); a signal to a run that has ended reads only its
snapshot and writes nothing. A wait for a run that ended in this process reads nothing, and a
wait for a run held here makes no task of its own (its executor answers it)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import (
    Engine,
    EventKind,
    Lifecycle,
    NodeContext,
    Park,
    SignalReceipt,
    SignalRefused,
)
from flowtide.model import Flow
from flowtide.store import EventRecord, Store
from tests.engine.engine_helpers import T0, at, fresh_store, kinds, of_kind, running
from tests.engine.test_engine_sweeper import race_flow, yields
from tests.engine.test_engine_wake_cost import WRITES, counted

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    return Park(key=None)


def ask_flow(name: str) -> Flow:
    return (
        FlowBuilder(f"urn:test:flow:{name}")
        .task("ask", ask, {"approved": "end"})
        .terminal("end")
        .build()
    )


async def test_a_worker_cancels_a_parked_run_in_one_transaction() -> None:
    flow = ask_flow("cancel-cost")
    async with running() as (engine, _clock):
        parked = await engine.run(flow)
        assert parked.lifecycle is Lifecycle.PARKED and not engine.held_runs()
        calls = counted(engine.store, parked.run_id)
        assert await engine.cancel(parked.run_id, "no longer needed")
        result = await engine.wait(parked.run_id)
        seen = Counter(calls)  # (what follows is this test's own reading)
        history = await engine.history(parked.run_id)
        (park,) = await engine.parks(parked.run_id)
        run = await engine.store.get_run(parked.run_id)
        lease = await engine.store.lease_of(parked.run_id)
    assert result.lifecycle is Lifecycle.CANCELLED and run.lifecycle == "cancelled"
    writes = {name: n for name, n in seen.items() if name in WRITES}
    reads = {name: n for name, n in seen.items() if name not in WRITES}
    assert writes == {"commit": 1}
    assert reads == {"load_run": 1}  # (and the wait for its end read nothing)
    assert kinds(history) == [
        "run_started",
        "node_started",
        "parked",
        "token_cancelled",
        "run_finished",
    ]
    assert park.status == "cancelled" and lease is None


async def test_a_parked_run_timed_out_by_its_deadline_ends_in_one_commit() -> None:
    """The sweeper claims the run at its deadline and rebuilds it: its parked token is
    cancelled by the commit of its end, not one of its own."""
    flow = ask_flow("deadline-cost")
    async with running() as (engine, clock):
        parked = await engine.run(flow, deadline=timedelta(seconds=60))
        calls = counted(engine.store, parked.run_id)
        await clock.advance(timedelta(seconds=61))
        result = await engine.wait(parked.run_id)
        seen = Counter(calls)
        history = kinds(await engine.history(parked.run_id))
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert seen["commit"] == 1
    assert history == ["run_started", "node_started", "parked", "token_cancelled", "run_finished"]


async def test_a_refused_or_repeated_signal_to_a_parked_run_nobody_holds_writes_nothing() -> None:
    """A worker rebuilds the run to find the park the signal addresses (one read), and lets go
    of it again, untouched, when the signal is refused; a repeat of an accepted signal (its
    idempotency key) is answered from the store. The run stays parked, held by nobody."""
    flow = ask_flow("refused-cost")
    async with running() as (engine, _clock):
        parked = await engine.run(flow)
        run_id = parked.run_id
        calls = counted(engine.store, run_id)
        with pytest.raises(SignalRefused) as wrong_place:
            await engine.signal(run_id, placement="elsewhere", payload={"ok": True})
        with pytest.raises(SignalRefused) as wrong_output:
            await engine.signal(run_id, placement="ask", output="nope")
        refused = Counter(calls)
        for _ in range(5):
            await asyncio.sleep(0)  # (let go of by a task of its own)
        assert not engine.held_runs()
        first = await engine.signal(run_id, placement="ask", idempotency_key="k1")
        result = await engine.wait(run_id)
        calls = counted(engine.store, run_id)
        again = await engine.signal(run_id, placement="ask", idempotency_key="k1")
        repeated = Counter(calls)
        history = kinds(await engine.history(run_id))
    assert wrong_place.value.reason == "unknown" and wrong_output.value.reason == "invalid_output"
    assert not {name for name in refused if name in WRITES}
    assert again.duplicate and (again.token_id, again.at) == (first.token_id, first.at)
    assert not {name for name in repeated if name in WRITES}
    assert result.lifecycle is Lifecycle.COMPLETED and history.count("signalled") == 1


async def test_a_keyed_signal_that_wakes_a_parked_run_reads_only_its_snapshot() -> None:
    flow = ask_flow("keyed-wake")
    async with running() as (engine, _clock):
        parked = await engine.run(flow)
        looked: list[str] = []  # (a look-up of the key names the key alone)
        answer_of = engine.store.signal_answer

        async def looking(key: str) -> Any:
            looked.append(key)
            return await answer_of(key)

        engine.store.signal_answer = looking  # type: ignore[method-assign]
        calls = counted(engine.store, parked.run_id)
        receipt = await engine.signal(parked.run_id, placement="ask", idempotency_key="once")
        result = await engine.wait(parked.run_id)
        seen = Counter(calls)
        assert looked == []
        again = await engine.signal(parked.run_id, placement="ask", idempotency_key="once")
        history = kinds(await engine.history(parked.run_id))
    assert result.lifecycle is Lifecycle.COMPLETED and not receipt.duplicate
    assert {name: n for name, n in seen.items() if name not in WRITES} == {"load_run": 1}
    assert {name: n for name, n in seen.items() if name in WRITES} == {"commit": 2}
    assert again.duplicate and again.at == receipt.at and history.count("signalled") == 1


async def test_a_signal_to_a_run_that_ended_reads_its_snapshot_and_writes_nothing() -> None:
    flow = ask_flow("ended-signal")
    async with running() as (engine, _clock):
        parked = await engine.run(flow)
        await engine.cancel(parked.run_id)
        await engine.wait(parked.run_id)
        await asyncio.sleep(0)
        assert not engine.held_runs()
        calls = counted(engine.store, parked.run_id)
        with pytest.raises(SignalRefused) as refused:
            await engine.signal(parked.run_id, placement="ask", payload={"ok": True})
        seen = Counter(calls)
    assert refused.value.reason == "cancelled"
    assert not {name for name in seen if name in WRITES}, seen


async def test_waiting_for_a_run_that_ended_here_reads_nothing() -> None:
    flow = ask_flow("wait-ended")
    async with running() as (engine, _clock):
        finished = asyncio.Event()

        def hook(event: EventRecord) -> None:
            if event.kind == EventKind.RUN_FINISHED:
                finished.set()

        engine.add_hook(hook)
        parked = await engine.run(flow)
        await engine.signal(parked.run_id, placement="ask", payload={"ok": True})
        await finished.wait()
        await asyncio.sleep(0)  # (its executor has let go of it)
        assert not engine.held_runs()
        calls = counted(engine.store, parked.run_id)
        first = await engine.wait(parked.run_id)
        again = await engine.wait(parked.run_id)
        seen = Counter(calls)
    assert first.lifecycle is Lifecycle.COMPLETED and first.state == {"ok": True}
    assert again == first
    assert seen == Counter()


gate_open: list[asyncio.Event] = []


@node(outputs=["done"])
async def held_open(ctx: NodeContext) -> str:
    await gate_open[0].wait()
    return "done"


async def test_a_wait_for_a_run_held_here_makes_no_task_of_its_own() -> None:
    # (Its executor answers: nothing looks at the store, or wakes to see if it still holds it.)
    gate_open[:] = [asyncio.Event()]
    flow = FlowBuilder("urn:test:flow:wait-held").task("w", held_open, {"done": "end"})
    async with running(autojump=False) as (engine, _clock):
        handle = await engine.start(flow.terminal("end").build())
        for _ in range(20):
            await asyncio.sleep(0)
        assert handle.run_id in engine.held_runs()
        before = asyncio.all_tasks()
        waiter = asyncio.ensure_future(engine.wait(handle.run_id))
        for _ in range(5):
            await asyncio.sleep(0)
        made = asyncio.all_tasks() - before - {waiter}
        assert not [t for t in made if "watch" in repr(t.get_coro())], made
        gate_open[0].set()
        result = await waiter
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_a_wait_for_a_run_let_go_here_is_answered_when_another_worker_ends_it() -> None:
    """The run parks (let go of here); another worker then wakes it and drives it to its end:
    the wait, begun while the run was held here, learns the end from the store."""
    flow = ask_flow("wait-let-go")
    clock = VirtualClock(T0)
    store = fresh_store()
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow])
    try:
        handle = await a.start(flow)
        waiter = asyncio.ensure_future(a.wait(handle.run_id))
        parked = await a.wait_parked(handle.run_id)
        assert parked.lifecycle is Lifecycle.PARKED and not a.held_runs()
        await b.signal(handle.run_id, placement="ask", payload={"ok": True})
        result = await asyncio.wait_for(waiter, 30)
    finally:
        await a.close()
        await b.close()
        await store.close()
        await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED and result.state == {"ok": True}


# -- races ------------


async def _one_cancel_race(rng: random.Random, order: int, store: Store, turns: int) -> str:
    """A worker's cancel of a parked run nobody holds, sent 1 µs before the park's deadline,
    races another worker's sweeper firing the deadline (its firing path run by hand, as in
    ``test_engine_sweeper``), each after a random number of loop turns, in both orders."""
    clock = VirtualClock(T0)
    flow = race_flow()
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow])
    try:
        run_id = (await a.run(flow)).run_id
        await a.sweeper.close()
        await b.sweeper.close()
        await clock.advance_to(at(10) - timedelta(microseconds=1))
        outcome: dict[str, bool] = {}

        async def cancel() -> None:
            await yields(rng, turns)
            outcome["cancelled"] = await b.cancel(run_id)

        async def sweep() -> None:
            await yields(rng, turns)
            leases = await store.claim_runs(a.owner, at(10), at(40))
            await a.taking.take(leases, at(10))

        await asyncio.gather(*([cancel(), sweep()] if order == 0 else [sweep(), cancel()]))
        await clock.advance(timedelta(seconds=1))
        result = await a.wait(run_id)
        history = kinds(await a.history(run_id))
        assert history.count("run_finished") == 1
        assert (await store.get_run(run_id)).lifecycle == result.lifecycle
        assert list(await store.due_of(run_id)) == []
        if outcome["cancelled"]:
            assert result.lifecycle is Lifecycle.CANCELLED, history
            return "cancel" if "node_timed_out" not in history else "both"
        assert result.outcome == "late" and "node_timed_out" in history, history
        return "timeout"
    finally:
        await a.close()
        await b.close()


async def test_a_workers_cancel_racing_a_deadline_fired_by_another_ends_the_run_once() -> None:
    rng = random.Random(13)
    store = fresh_store()
    try:
        # (Up to 3,000 loop turns before each side: a database's round trips take several.)
        seen = {await _one_cancel_race(rng, i % 2, store, 3000) for i in range(40)}
    finally:
        await store.close()
    assert "cancel" in seen and "timeout" in seen


async def _one_signal_race(rng: random.Random, order: int, store: Store, turns: int) -> str:
    """Two workers signal the same parked run nobody holds at once (each wakes it itself, the
    store deciding who takes it), each after a random number of loop turns."""
    clock = VirtualClock(T0)
    flow = race_flow()
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow])
    try:
        run_id = (await a.run(flow)).run_id
        answers: dict[str, SignalReceipt | SignalRefused] = {}

        async def signal(engine: Engine, name: str) -> None:
            await yields(rng, turns)
            try:
                answers[name] = await engine.signal(run_id, placement="w", output="approved")
            except SignalRefused as exc:
                answers[name] = exc

        pair = [signal(a, "a"), signal(b, "b")]
        await asyncio.gather(*(pair if order == 0 else reversed(pair)))
        result = await a.wait(run_id)
        history = await a.history(run_id)
        assert len(of_kind(history, "signalled")) == 1
        assert kinds(history).count("run_finished") == 1
        assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "approved"
        accepted = [n for n, x in answers.items() if isinstance(x, SignalReceipt)]
        refused = [x for x in answers.values() if isinstance(x, SignalRefused)]
        assert len(accepted) == 1 and len(refused) == 1, answers
        assert refused[0].reason == "moved_on"
        return accepted[0]
    finally:
        await a.close()
        await b.close()


async def test_two_workers_signalling_one_parked_run_at_once_apply_it_once() -> None:
    rng = random.Random(17)
    store = fresh_store()
    try:
        winners = {await _one_signal_race(rng, i % 2, store, 3000) for i in range(40)}
    finally:
        await store.close()
    assert winners == {"a", "b"}


async def _one_cancel_signal_race(rng: random.Random, order: int, store: Store) -> str:
    """A worker's cancel and another worker's signal (whose output ends the run) of one parked
    run nobody holds, each after a random number of loop turns: the run ends once, as the
    answers say."""
    clock = VirtualClock(T0)
    flow = race_flow()
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow])
    try:
        run_id = (await a.run(flow)).run_id
        got: dict[str, Any] = {}

        async def cancel() -> None:
            await yields(rng, 3000)
            got["cancelled"] = await a.cancel(run_id)

        async def signal() -> None:
            await yields(rng, 3000)
            try:
                got["signal"] = await b.signal(run_id, placement="w", output="approved")
            except SignalRefused as exc:
                got["signal"] = exc

        await asyncio.gather(*([cancel(), signal()] if order == 0 else [signal(), cancel()]))
        result = await a.wait(run_id)
        history = kinds(await a.history(run_id))
        assert history.count("run_finished") == 1
        assert (await store.get_run(run_id)).lifecycle == result.lifecycle
        if got["cancelled"]:
            assert result.lifecycle is Lifecycle.CANCELLED, history
            assert isinstance(got["signal"], SignalRefused) and "signalled" not in history
            assert got["signal"].reason == "cancelled"
            return "cancel"
        assert result.lifecycle is Lifecycle.COMPLETED, history
        assert isinstance(got["signal"], SignalReceipt) and history.count("signalled") == 1
        return "signal"
    finally:
        await a.close()
        await b.close()


async def test_a_workers_cancel_racing_another_workers_signal_ends_the_run_once() -> None:
    rng = random.Random(19)
    store = fresh_store()
    try:
        seen = {await _one_cancel_signal_race(rng, i % 2, store) for i in range(40)}
    finally:
        await store.close()
    assert seen == {"cancel", "signal"}


async def test_a_signal_whose_key_another_worker_answered_first_leaves_its_run_as_it_was() -> None:
    """Two workers signal two parked runs with one idempotency key at once: one run takes it;
    the other's wake is refused whole by the store (the key answered first), its signal is
    answered as the first one's duplicate, and its run stays parked, untouched (its rebuilt
    view, changed in memory by the refused step, is dropped)."""
    flow = ask_flow("same-key")
    store = fresh_store()
    clock = VirtualClock(T0)
    a = Engine(clock=clock, store=store, flows=[flow])
    b = Engine(clock=clock, store=store, flows=[flow])
    try:
        for i in range(6):
            key = f"k{i}"
            first, second = (await a.run(flow)).run_id, (await a.run(flow)).run_id
            answers = await asyncio.gather(
                a.signal(first, placement="ask", idempotency_key=key),
                b.signal(second, placement="ask", idempotency_key=key),
            )
            await clock.advance(timedelta(seconds=5))
            (won,) = [x for x in answers if not x.duplicate]
            assert {x.run_id for x in answers} == {won.run_id}
            lost = second if won.run_id == first else first
            assert (await a.wait(won.run_id)).lifecycle is Lifecycle.COMPLETED
            assert (await store.get_run(lost)).lifecycle == "parked"
            assert kinds(await a.history(lost)) == ["run_started", "node_started", "parked"]
            assert not a.held_runs() and not b.held_runs()
    finally:
        await a.close()
        await b.close()
        await store.close()
        await clock.aclose()


@node(outputs=["approved"])
async def ask_until_ok(ctx: NodeContext) -> Any:
    if ctx.signal is not None and ctx.signal.get("ok"):
        return "approved"
    return Park(key=None)


async def test_a_keyed_signal_repeated_once_its_run_parked_again_is_a_duplicate() -> None:
    """The first signal woke the node, which parked again; its repeat (same key, same run) finds
    the new park open, and its wake's commit is refused: it is answered as the first one's
    duplicate, and the run stays parked at its new park."""
    flow = FlowBuilder("urn:test:flow:repeat-reparked").task(
        "ask", ask_until_ok, {"approved": "end"}
    )
    async with running() as (engine, _clock):
        run_id = (await engine.run(flow.terminal("end").build())).run_id
        first = await engine.signal(
            run_id, placement="ask", payload={"ok": False}, idempotency_key="k"
        )
        again = await engine.wait_parked(run_id)
        assert again.lifecycle is Lifecycle.PARKED
        await asyncio.sleep(0)
        repeat = await engine.signal(
            run_id, placement="ask", payload={"ok": True}, idempotency_key="k"
        )
        await asyncio.sleep(0)
        run = await engine.store.get_run(run_id)
        history = kinds(await engine.history(run_id))
        parks = await engine.parks(run_id)
    assert repeat.duplicate and (repeat.park, repeat.at) == (first.park, first.at)
    assert run.lifecycle == "parked" and history.count("signalled") == 1
    assert [p.status for p in parks] == ["signalled", "parked"]
