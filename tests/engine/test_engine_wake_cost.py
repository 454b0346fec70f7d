"""What waking a parked run costs the store: a worker that signals a run nobody holds and
drives it to its end reads once (the run's snapshot, where the park the signal addresses is
found) and writes two transactions (the wake, with the run's lease taken and the node's attempt
started; the node's step with the run's end)."""

from __future__ import annotations

import asyncio
import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, EventKind, Lifecycle, NodeContext, Park
from flowtide.engine.run.executor.settling import Settling
from flowtide.store import Commit, EventRecord, Store
from tests.engine.engine_helpers import T0, freeze, fresh_store, kinds, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

WRITES = frozenset({"commit", "acquire_run", "create_run", "request_signal", "release_runs"})
"""The store calls that write (each one transaction)."""
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("inside", default=False)


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    return Park(key=None)


def counted(store: Store, run_id: str) -> Counter[str]:
    """Count the calls made on ``store`` about run ``run_id`` from now on (a call a store makes
    on itself, inside another, is not one more)."""
    calls: Counter[str] = Counter()

    def about(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        first = args[0] if args else kwargs.get("run_id")
        return (first.run_id if isinstance(first, Commit) else first) == run_id

    def wrap(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            if _inside.get():
                return await method(*args, **kwargs)
            if about(args, kwargs):
                calls[name] += 1
            token = _inside.set(True)
            try:
                return await method(*args, **kwargs)
            finally:
                _inside.reset(token)

        return call

    for name in dir(type(store)):
        method = getattr(store, name)
        if not name.startswith("_") and asyncio.iscoroutinefunction(method):
            setattr(store, name, wrap(name, method))
    return calls


async def test_a_resume_reads_once_and_writes_two_transactions() -> None:
    flow = FlowBuilder("urn:test:flow:wake").task("ask", ask, {"approved": "end"}).terminal("end")
    async with running() as (engine, _clock):
        finished = asyncio.Event()

        def hook(event: EventRecord) -> None:
            if event.kind == EventKind.RUN_FINISHED:
                finished.set()

        engine.add_hook(hook)
        parked = await engine.run(flow.build())
        assert parked.lifecycle is Lifecycle.PARKED and not engine.held_runs()
        calls = counted(engine.store, parked.run_id)
        await engine.signal(parked.run_id, placement="ask", payload={"ok": True})
        await finished.wait()
        calls = Counter(calls)  # (what follows is this test's own reading)
        result = await engine.wait(parked.run_id)
        events = [e.kind for e in await engine.history(parked.run_id)]
    assert result.lifecycle is Lifecycle.COMPLETED and result.state == {"ok": True}
    writes = {name: n for name, n in calls.items() if name in WRITES}
    reads = {name: n for name, n in calls.items() if name not in WRITES}
    assert writes == {"commit": 2}
    assert reads == {"load_run": 1}
    # The same events, in the same order, as when each was a commit of its own.
    assert events[-5:] == [
        "signalled",
        "node_started",
        "node_finished",
        "terminal_reached",
        "run_finished",
    ]


attempts: list[tuple[str, Any]] = []
"""(ctx.idempotency_key, ctx.signal) of every attempt of ``slow_answer`` woken by a signal."""


@node(outputs=["approved"])
async def slow_answer(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=None)
    attempts.append((ctx.idempotency_key, ctx.signal))
    await ctx.clock.sleep(timedelta(seconds=100))
    return "approved"


async def test_a_worker_lost_after_a_wake_leaves_its_attempt_to_run_again_with_the_signal() -> None:
    attempts.clear()
    flow = FlowBuilder("urn:test:flow:wake-lost").task("ask", slow_answer, {"approved": "end"})
    built = flow.terminal("end").build()
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    lost = Engine(clock=clock, store=store, owner="lost", lease_ttl=ttl)
    rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=ttl, flows=[built])
    try:
        parked = await lost.run(built)
        assert parked.lifecycle is Lifecycle.PARKED
        await lost.signal(parked.run_id, placement="ask", payload={"ok": True})
        # The wake's commit started the attempt; the worker is lost while it runs.
        await clock.advance(timedelta(seconds=1))
        await freeze(lost)
        rescuer.sweeper  # noqa: B018 - the second worker looks for work
        await clock.advance(timedelta(seconds=200))
        result = await rescuer.wait(parked.run_id)
        history = await rescuer.history(parked.run_id)
    finally:
        await lost.close()
        await rescuer.close()
        await clock.aclose()
        await store.close()
    assert (result.lifecycle, result.state) == (Lifecycle.COMPLETED, {"ok": True})
    # Run again once, by the worker that took the run over: same attempt (same idempotency
    # key), the signal's payload still there.
    assert len(attempts) == 2 and attempts[0] == attempts[1]
    assert attempts[0][1] == {"ok": True}
    events = kinds(history)
    at_wake = events.index("signalled")
    assert events[at_wake : at_wake + 2] == ["signalled", "node_started"]
    assert events.count("signalled") == 1 and events.count("node_finished") == 1
    assert events.count("node_started") == 3  # (the park's, the wake's, the rescuer's)
    assert events[-3:] == ["node_finished", "terminal_reached", "run_finished"]


@node(outputs=["approved"])
async def ask_twice(ctx: NodeContext) -> Any:
    if ctx.signal is not None and ctx.signal.get("ok"):
        return "approved"
    return Park(key=None)


async def test_a_resume_settles_the_run_once_if_it_parks_again_and_never_if_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settles: list[str] = []
    settle, given_back = Settling.settle, Settling.given_back

    async def counted(self: Settling) -> None:
        settles.append(self.ex.view.run.id)
        await settle(self)

    async def counted_with_a_step(self: Settling) -> None:
        settles.append(self.ex.view.run.id)  # (settled by the commit of the step that parked)
        await given_back(self)

    monkeypatch.setattr(Settling, "settle", counted)
    monkeypatch.setattr(Settling, "given_back", counted_with_a_step)
    flow = FlowBuilder("urn:test:flow:settles").task("ask", ask_twice, {"approved": "end"})
    async with running() as (engine, _clock):
        parked = await engine.run(flow.terminal("end").build())
        run_id = parked.run_id
        settles.clear()
        await engine.signal(run_id, placement="ask", payload={"ok": False})
        again = await engine.wait_parked(run_id)
        assert again.lifecycle is Lifecycle.PARKED and not engine.held_runs()
        assert settles == [run_id]  # (not one more for the rebuild, before the signal)
        settles.clear()
        await engine.signal(run_id, placement="ask", payload={"ok": True})
        result = await engine.wait(run_id)
        assert result.lifecycle is Lifecycle.COMPLETED
        assert settles == []
