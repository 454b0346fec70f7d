"""A branch's arrival at its join is stored by the commit of its node's finish (one step a
branch), and the branches of a split that arrive at their join while a commit of the run is on
its way are stored together: a few commits for the whole join. Each step's events
stay in the history in the order the steps decided, the join fires once, a branch that fails or
times out among them is handled as alone, and a commit of several steps that is lost (a
conflict, a worker lost) loses all of them, which run again."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Output
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, LeaseLost, Store
from tests.engine.engine_helpers import (
    T0,
    freeze,
    fresh_store,
    instant,
    kinds,
    running,
    split_of,
)

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

BRANCHES = 20
TURNS = 25
"""How many turns of the event loop a commit takes before the store applies it, on every
store: the other branches' steps queue meanwhile, as they do behind a database's round trip."""


def slowed(
    store: Store,
    run_commit: Callable[[Commit], Awaitable[None]] | None = None,
    *,
    turns: int = TURNS,
) -> list[Commit]:
    """Make each commit of ``store`` take ``turns`` turns of the loop (then ``run_commit``, if
    given, may refuse it); returns the commits, as they come."""
    real = store.commit
    seen: list[Commit] = []

    async def commit(c: Commit) -> Sequence[EventRecord]:
        for _ in range(turns):
            await asyncio.sleep(0)
        seen.append(c)
        if run_commit is not None:
            await run_commit(c)
        return await real(c)

    store.commit = commit  # type: ignore[method-assign,assignment]
    return seen


def branch_steps(c: Commit) -> int:
    """How many branches' node steps ``c`` stores."""
    return sum(1 for e in c.events if e.kind == "node_finished" and (e.placement or "")[:1] == "b")


def assert_in_order(history: Sequence[EventRecord], branches: int) -> None:
    """The history is numbered without a gap; each branch's node started, finished and arrived
    at the join in that order; the join fired once, after every arrival; the run ended last."""
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    events = kinds(history)
    assert events.count("join_fired") == 1
    fired = events.index("join_fired")
    arrivals = [i for i, e in enumerate(history) if e.kind == "join_arrived"]
    assert len(arrivals) == branches and max(arrivals) < fired
    for at in arrivals:
        token = history[at].token_id
        own = [e.kind for e in history[:at] if e.token_id == token and e.placement != "fork"]
        assert own[-2:] == ["node_started", "node_finished"], own
    assert events[-2:] == ["terminal_reached", "run_finished"]


def branch_tokens(c: Commit, kind: str) -> set[str | None]:
    """The tokens of the branches (``b0``, ``b1``, ...) with a ``kind`` event in ``c``."""
    return {e.token_id for e in c.events if e.kind == kind and (e.placement or "j")[:1] in "bj"}


async def test_a_branch_arrives_at_its_join_in_the_commit_of_its_nodes_finish() -> None:
    flow = split_of([instant] * BRANCHES, name="arrives")
    async with running() as (engine, _clock):
        commits = slowed(engine.store, turns=0)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert_in_order(history, BRANCHES)
    for c in commits:
        assert branch_tokens(c, "join_arrived") == branch_tokens(c, "node_finished")
    # One step a branch (its node's finish and its arrival): a commit each, at most.
    assert len(commits) <= BRANCHES + 4


@node(outputs=["done"])
def threaded(ctx: NodeContext) -> Output:
    """A sync branch node, run in a worker thread."""
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
def threaded_boom(ctx: NodeContext) -> Output:
    raise RuntimeError("this branch fails")


@pytest.mark.parametrize("turns", [0, 1, 3, TURNS])
async def test_branches_waiting_for_a_thread_start_in_turn_and_each_once(turns: int) -> None:
    flow = split_of([threaded] * BRANCHES, name="threads")
    async with running(max_threads=2) as (engine, _clock):
        slowed(engine.store, turns=turns)
        for _ in range(5):  # (the race of threads given back against steps queued, again)
            result = await engine.run(flow)
            history = await engine.history(result.run_id)
            assert result.lifecycle is Lifecycle.COMPLETED
            assert sorted(result.state["visited"]) == sorted(["fork", "after", *flow_branches()])
            assert_in_order(history, BRANCHES)
            started = Counter(e.placement for e in history if e.kind == "node_started")
            assert all(started[b] == 1 for b in flow_branches()), started


async def test_a_first_join_cancels_the_branches_whose_start_is_queued() -> None:
    flow = split_of([threaded] * BRANCHES, "first", name="threads-first")
    async with running(max_threads=2) as (engine, _clock):
        slowed(engine.store)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    events = kinds(history)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert events.count("join_fired") == 1
    fired = events.index("join_fired")
    # No branch starts or arrives after the join fired; each that had not arrived is cancelled.
    late = {"node_started", "node_finished", "join_arrived"}
    assert not [e for e in history[fired:] if e.kind in late and e.placement != "after"]
    arrived = events.count("join_arrived")
    assert events.count("token_cancelled") == BRANCHES - arrived


async def test_a_threaded_branch_that_fails_among_queued_starts_fails_the_run_once() -> None:
    flow = split_of([threaded] * 8 + [threaded_boom] + [threaded] * 8, name="threads-fail")
    async with running(max_threads=2) as (engine, _clock):
        slowed(engine.store)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.placement for e in result.errors] == ["b8"]
    events = kinds(history)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert events.count("node_failed") == 1 and "join_fired" not in events
    assert events[-1] == "run_finished" and events.count("run_finished") == 1


async def test_branches_arriving_at_a_join_are_stored_together() -> None:
    flow = split_of([instant] * BRANCHES, name="together")
    async with running() as (engine, _clock):
        commits = slowed(engine.store)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert sorted(result.state["visited"]) == sorted(["fork", "after", *flow_branches()])
    assert_in_order(history, BRANCHES)
    # Two commits a branch (its node's step, its arrival) when each step was stored alone.
    assert len(commits) <= 8, [len(c.events) for c in commits]
    assert max(branch_steps(c) for c in commits) > BRANCHES // 2


def flow_branches() -> list[str]:
    return [f"b{i}" for i in range(BRANCHES)]


@node(outputs=["done"])
async def boom(ctx: NodeContext) -> Output:
    raise RuntimeError("this branch fails")


async def test_a_branch_that_fails_among_queued_branches_fails_the_run_once() -> None:
    flow = split_of([instant] * (BRANCHES - 1) + [boom], name="fails-among")
    async with running() as (engine, _clock):
        slowed(engine.store)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.placement for e in result.errors] == [f"b{BRANCHES - 1}"]
    events = kinds(history)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert events.count("node_failed") == 1 and "join_fired" not in events
    assert events[-1] == "run_finished" and events.count("run_finished") == 1


@node(outputs=["done"])
async def second(ctx: NodeContext) -> Output:
    await ctx.clock.sleep(timedelta(seconds=1))
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
async def late(ctx: NodeContext) -> Output:
    await ctx.clock.sleep(timedelta(seconds=10))
    return Output("done", update={"visited": [ctx.placement]})


def timing_out_flow() -> Flow:
    """Branches that all finish at one instant, one of them by its window's end (it routes
    ``timeout`` to the join too)."""
    b = FlowBuilder("urn:test:flow:join-commits-timeout")
    names = [f"b{i}" for i in range(BRANCHES)]
    b.task("fork", instant, {"done": names})
    for name in names[:-1]:
        b.task(name, second, {"done": "j"})
    b.task(names[-1], late, {"done": "j", "timeout": "j"}, timeout="PT1S")
    b.join("j", "all", {"success": "end"})
    return b.terminal("end").reducer("visited", "extend").build()


async def test_a_branch_timing_out_among_queued_branches_arrives_once() -> None:
    flow = timing_out_flow()
    async with running() as (engine, _clock):
        slowed(engine.store)
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert sorted(result.state["visited"]) == sorted(["fork", *flow_branches()[:-1]])
    timed_out = [e for e in history if e.kind == "node_timed_out"]
    assert [e.placement for e in timed_out] == [f"b{BRANCHES - 1}"]
    assert kinds(history).count("join_arrived") == BRANCHES
    assert kinds(history).count("join_fired") == 1


async def test_a_refused_commit_of_several_steps_stores_none_of_them_and_they_run_again() -> None:
    refused: list[Commit] = []

    async def refuse_the_first_of_several(c: Commit) -> None:
        if not refused and branch_steps(c) > 1:
            refused.append(c)
            raise LeaseLost(f"run {c.run_id!r}: taken over (as a test has it)")

    flow = split_of([instant] * BRANCHES, name="refused")
    async with running() as (engine, _clock):
        slowed(engine.store, refuse_the_first_of_several)
        handle = await engine.start(flow)
        result = await engine.wait(handle.run_id)
        history = await engine.history(result.run_id)
    assert refused and result.lifecycle is Lifecycle.COMPLETED
    lost = {e.placement for e in refused[0].events if e.kind == "node_finished"}
    # Each branch's step is stored once: those of the refused commit by the run rebuilt.
    finished = Counter(e.placement for e in history if e.kind == "node_finished")
    assert all(finished[b] == 1 for b in flow_branches()) and lost <= set(finished)
    assert sorted(result.state["visited"]) == sorted(["fork", "after", *flow_branches()])
    assert_in_order(history, BRANCHES)


async def test_a_worker_lost_while_it_stores_several_steps_leaves_none_of_them() -> None:
    stuck = asyncio.Event()
    held: list[Commit] = []

    async def never_the_first_of_several(c: Commit) -> None:
        if not held and branch_steps(c) > 1:
            held.append(c)
            stuck.set()
            await asyncio.Event().wait()  # (the worker is lost with its transaction)

    flow = split_of([instant] * BRANCHES, name="lost")
    clock = VirtualClock(T0)
    store = fresh_store()
    ttl = timedelta(seconds=30)
    lost = Engine(clock=clock, store=store, owner="lost", lease_ttl=ttl)
    rescuer = Engine(clock=clock, store=store, owner="rescuer", lease_ttl=ttl, flows=[flow])
    try:
        slowed(store, never_the_first_of_several)
        handle = await lost.start(flow)
        await stuck.wait()
        await freeze(lost)
        left = await rescuer.history(handle.run_id)
        rescuer.sweeper  # noqa: B018 - the second worker looks for work
        await clock.advance(timedelta(seconds=200))
        result = await rescuer.wait(handle.run_id)
        history = await rescuer.history(handle.run_id)
    finally:
        await lost.close()
        await rescuer.close()
        await clock.aclose()
        await store.close()
    lost_steps = [e for e in held[0].events if e.kind == "node_finished"]
    # Nothing of the lost commit was stored: none of its branches' steps.
    stored = {(e.token_id, e.placement) for e in left if e.kind == "node_finished"}
    assert not stored & {(e.token_id, e.placement) for e in lost_steps}
    assert result.lifecycle is Lifecycle.COMPLETED
    finished = Counter(e.placement for e in history if e.kind == "node_finished")
    assert all(finished[b] == 1 for b in flow_branches())
    assert_in_order(history, BRANCHES)
