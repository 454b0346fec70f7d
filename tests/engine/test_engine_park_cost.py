"""What starting a run that parks at once costs the store: a worker that starts a run whose
first node parks reads nothing and writes two transactions (the run created with its start and
its first attempt's; the park, with the run given back to the store). The run is then as a
rebuild needs it: nobody holds it, its resume checkpoint after its last event (a rebuild reads
no history), and the sweeper is not sent to the store for it. A signal or a cancel that comes
while the park's commit is under way is applied once."""

from __future__ import annotations

import asyncio
import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, EventKind, Lifecycle, NodeContext, Park, RunResult
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, RunRecord, Store
from tests.engine.engine_helpers import kinds, running
from tests.engine.test_engine_wake_cost import WRITES

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    ctx.state["asked"] = True
    return Park(key=None)


def park_flow(name: str) -> Flow:
    return (
        FlowBuilder(f"urn:test:flow:{name}")
        .task("ask", ask, {"approved": "end"})
        .terminal("end")
        .build()
    )


async def test_a_run_that_parks_at_once_writes_two_transactions_and_reads_nothing() -> None:
    flow = park_flow("park-cost")
    async with running() as (engine, _clock):
        await engine.run(flow)  # (the flow's document stored, the engine at work)
        calls = [counted(engine.store, run_id) for run_id in RUN_IDS]
        for run_id in RUN_IDS:
            parked = await engine.run(flow, run_id=run_id)
            assert parked.lifecycle is Lifecycle.PARKED and parked.state == {"asked": True}
            assert not engine.held_runs()
        seen = [Counter(c) for c in calls]  # (what follows is this test's own reading)
        snapshots = [await engine.store.load_run(run_id) for run_id in RUN_IDS]
        history = await engine.history(RUN_IDS[0])
    for run_calls in seen:
        writes = {name: n for name, n in run_calls.items() if name in WRITES}
        reads = {name: n for name, n in run_calls.items() if name not in WRITES}
        assert writes == {"create_run": 1, "commit": 1}
        assert reads == {}
    assert kinds(history) == ["run_started", "node_started", "parked"]
    for snapshot in snapshots:
        assert snapshot.run.lifecycle == "parked" and snapshot.lease is None
        assert snapshot.state == {"asked": True} and len(snapshot.parks) == 1
        # Its checkpoint is after its last event: a rebuild reads no history.
        assert snapshot.run.checkpoint is not None and snapshot.run.checkpoint.seq == 3
        assert snapshot.history == []


RUN_IDS = ("park-1", "park-2", "park-3")


def counted(store: Store, run_id: str) -> Counter[str]:
    """The calls made on ``store`` about run ``run_id`` from now on, counted (wrappers put one
    over another: each counts its run's calls, a store's calls inside another not again)."""
    calls: Counter[str] = Counter()

    def about(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        first = args[0] if args else kwargs.get("run_id")
        if isinstance(first, Commit | RunRecord):
            first = first.run_id if isinstance(first, Commit) else first.id
        return bool(first == run_id)

    def wrap(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            if about(args, kwargs) and not _inside.get():
                calls[name] += 1
                token = _inside.set(True)
                try:
                    return await method(*args, **kwargs)
                finally:
                    _inside.reset(token)
            return await method(*args, **kwargs)

        return call

    for name in dir(type(store)):
        method = getattr(store, name)
        if not name.startswith("_") and asyncio.iscoroutinefunction(method):
            setattr(store, name, wrap(name, method))
    return calls


_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("inside", default=False)


async def test_a_run_parked_in_one_commit_is_rebuilt_and_resumed() -> None:
    flow = park_flow("park-resume")
    async with running(flows=[flow]) as (engine, _clock):
        parked = await engine.run(flow)
        await engine.signal(parked.run_id, placement="ask", payload={"ok": True})
        result = await engine.wait(parked.run_id)
        history = await engine.history(parked.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {"asked": True, "ok": True}
    assert kinds(history) == [
        "run_started",
        "node_started",
        "parked",
        "signalled",
        "node_started",
        "node_finished",
        "terminal_reached",
        "run_finished",
    ]


ROUNDS = 12


@dataclass(frozen=True)
class Racer:
    """A request sent to a run while the commit that parks it is under way: ``send`` sends it
    (its answer returned), ``check`` checks the run's end (the answer, its result, the kinds
    of its history)."""

    send: Callable[[Engine, str], Awaitable[Any]]
    check: Callable[[Any, RunResult, list[str]], None]


async def _signal(engine: Engine, run_id: str) -> None:
    await engine.signal(run_id, placement="ask", payload={"ok": True})


def _signalled_once(_answer: Any, result: RunResult, history: list[str]) -> None:
    assert result.lifecycle is Lifecycle.COMPLETED, history
    assert result.state == {"asked": True, "ok": True}
    assert history.count("signalled") == 1 and history.count("parked") == 1
    assert history[-3:] == ["node_finished", "terminal_reached", "run_finished"]


async def _cancel(engine: Engine, run_id: str) -> bool:
    return await engine.cancel(run_id)


def _cancelled(answer: Any, result: RunResult, history: list[str]) -> None:
    assert answer is True and result.lifecycle is Lifecycle.CANCELLED, history
    assert history[-1] == "run_finished" and history.count("parked") == 1


RACERS = {"signal": Racer(_signal, _signalled_once), "cancel": Racer(_cancel, _cancelled)}


@pytest.mark.parametrize("racer", RACERS.values(), ids=RACERS.keys())
async def test_a_request_during_the_commit_that_parks_the_run_is_applied_once(
    racer: Racer,
) -> None:
    """The request (a signal, a cancel) finds the run still held, and waits for the park's
    commit (which gives the run back): the run is taken back for it, not let go, and the
    request is applied once (the signal resumes the run, the cancel ends it). Run with the
    request sent after 0 to 3 turns of the loop within the commit."""
    flow = park_flow("park-race")
    async with running(flows=[flow]) as (engine, _clock):
        store = engine.store
        commit = store.commit
        requests: list[asyncio.Task[Any]] = []
        turns = [0]

        async def racing(c: Commit) -> Sequence[EventRecord]:
            if any(e.kind == EventKind.PARKED for e in c.events) and not requests:
                requests.append(asyncio.ensure_future(_after(turns[0], racer, engine, c.run_id)))
            return await commit(c)

        store.commit = racing  # type: ignore[method-assign,assignment]
        for i in range(ROUNDS):
            turns[0] = i % 4
            requests.clear()
            handle = await engine.start(flow)
            result = await handle.result()
            (answer,) = await asyncio.gather(*requests)
            history = kinds(await engine.history(handle.run_id))
            racer.check(answer, result, history)
        assert not engine.held_runs()


async def _after(turns: int, racer: Racer, engine: Engine, run_id: str) -> Any:
    for _ in range(turns):
        await asyncio.sleep(0)
    return await racer.send(engine, run_id)


async def test_a_run_given_back_parked_does_not_send_the_sweeper_to_the_store(
    every_store: str,
) -> None:
    """Its wake instant only moved later (from its lease's expiry to its next due entry, none
    here): the sweeper, armed for the earliest instant it read, need not look again."""
    if every_store == "sqlite":
        pytest.skip("SQLite tells its waiters of each of its own writes: the sweeper looks again")
    flow = park_flow("park-sweeper")
    async with running(autojump=False) as (engine, clock):
        await engine.run(flow)
        await clock.settle()
        looks = engine.sweeper.statistics().wakeups
        for _ in range(5):
            await engine.run(flow)
            await clock.settle()
        assert engine.sweeper.statistics().wakeups == looks
