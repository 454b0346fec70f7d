"""A parent whose subflow child waits parked is let go like any parked run (no executor, no
lease), and the child's end wakes it durably: a due entry the child's end commit sets on the
parent, which any worker claims."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

import pytest

from flowtide.authoring import FlowBuilder
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle
from flowtide.engine.run._commit import COMMIT_ATTEMPTS
from flowtide.engine.run.due import DuePurpose
from flowtide.store import (
    Commit,
    CommitOutcomeUnknown,
    EventRecord,
    RunRecord,
    Store,
    StoreDown,
    TokenStatus,
)
from tests.engine.engine_helpers import T0, freeze, fresh_store, of_kind, running
from tests.engine.test_engine_children import (
    approval_child,
    parent_of,
    slow_child_flow,
    until_let_go,
    until_parked,
)

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


async def test_a_parent_whose_child_parks_is_held_by_no_engine_and_holds_no_lease() -> None:
    child = approval_child()
    parent = parent_of(child)
    async with running(flows=[parent, child]) as (engine, _):
        store = engine.store
        parked = await asyncio.wait_for(engine.run(parent, {"order": "w1"}), 60)
        child_id = await until_parked(store, "approve:w1")
        await until_let_go(engine)
        leases = [await store.lease_of(r) for r in (parked.run_id, child_id)]
        (sub,) = await store.tokens(parked.run_id)
        # What a rebuild needs, durable: the subflow's token, running there, waiting for its
        # child (whose id it derives).
        stored = await store.get_run(parked.run_id)
    assert parked.lifecycle is Lifecycle.PARKED and stored.lifecycle == "parked"
    assert leases == [None, None]
    assert (sub.placement, sub.status) == ("sub", TokenStatus.RUNNING)


async def test_the_childs_end_wakes_the_parent_in_an_engine_that_never_held_it() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    first = Engine(clock=clock, store=store, flows=[parent, child], owner="first")
    client = Engine(clock=clock, store=store, executes=False)
    second = Engine(clock=clock, store=store, owner="second")
    try:
        handle = await first.start(parent, {"order": "w2"})
        child_id = await until_parked(store, "approve:w2")
        await asyncio.wait_for(first.wait_parked(handle.run_id), 60)
        await until_let_go(first)
        await first.close()  # (gone: the parent and its child are in the store only)
        second.sweeper  # noqa: B018
        await client.signal(key="approve:w2", payload={"answer": "yes"})
        result = await asyncio.wait_for(client.wait(handle.run_id), 60)
        child_result = await client.wait(child_id)
        history = await client.history(handle.run_id)
        due = await store.due_of(handle.run_id)
    finally:
        await client.close()
        await second.close()
        await clock.aclose()
        await store.close()
    assert (child_result.lifecycle, result.lifecycle) == (Lifecycle.COMPLETED,) * 2
    assert (result.outcome, result.state["answer"]) == ("done", "yes")
    (finished,) = of_kind(history, "subflow_finished")
    assert (finished.data["child"], finished.data["output"]) == (child_id, "success")
    assert due == []


async def test_a_crash_between_the_childs_end_and_the_parents_wake_loses_nothing() -> None:
    child = approval_child()
    parent = parent_of(child)
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    crashing = Engine(clock=clock, store=store, flows=[parent, child], owner="crashing")
    fresh = Engine(clock=clock, store=store, flows=[parent, child], owner="fresh")
    try:
        handle = await crashing.start(parent, {"order": "w3"})
        child_id = await until_parked(store, "approve:w3")
        await asyncio.wait_for(crashing.wait_parked(handle.run_id), 60)
        await until_let_go(crashing)
        # It stops looking for work, then drives the child to its end, and is gone before
        # anyone wakes the parent.
        await freeze(crashing)
        await crashing.signal(key="approve:w3", payload={"answer": "late"})
        ended = await asyncio.wait_for(crashing.wait(child_id), 60)
        (wake,) = await store.due_of(handle.run_id)
        await crashing.close()
        fresh.sweeper  # noqa: B018
        result = await asyncio.wait_for(fresh.wait(handle.run_id), 60)
    finally:
        await crashing.close()
        await fresh.close()
        await clock.aclose()
        await store.close()
    assert ended.lifecycle is Lifecycle.COMPLETED
    assert (wake.token_id, wake.purpose) == (
        f"{handle.run_id}.1",
        DuePurpose.child_ended(child_id).format(),
    )
    assert (result.lifecycle, result.state["answer"]) == (Lifecycle.COMPLETED, "late")


async def test_an_interrupting_timer_on_a_subflow_fires_with_nobody_holding_its_parent() -> None:
    child = approval_child()
    parent = (
        FlowBuilder("urn:test:flow:nudged-parent")
        .subflow(
            "sub",
            child,
            {"success": "end", "nudge": "late"},
            timers=[{"after": "PT10M", "output": "nudge", "interrupting": True}],
        )
        .terminal("end", "done")
        .terminal("late", "late")
        .build()
    )
    async with running(False, flows=[parent, child]) as (engine, clock):
        handle = await engine.start(parent, {"order": "w5"})
        await clock.advance(timedelta(minutes=1))
        child_id = await until_parked(engine.store, "approve:w5")
        await until_let_go(engine)
        await clock.advance(timedelta(minutes=10))
        result = await asyncio.wait_for(engine.wait(handle.run_id), 60)
        child_result = await asyncio.wait_for(engine.wait(child_id), 60)
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "late")
    assert child_result.lifecycle is Lifecycle.CANCELLED


async def test_the_deadline_of_a_parent_let_go_cancels_its_parked_child() -> None:
    child = approval_child()
    parent = parent_of(child)
    async with running(False, flows=[parent, child]) as (engine, clock):
        handle = await engine.start(parent, {"order": "w6"}, deadline=timedelta(hours=1))
        await clock.advance(timedelta(minutes=1))
        child_id = await until_parked(engine.store, "approve:w6")
        await until_let_go(engine)
        await clock.advance(timedelta(hours=1))
        result = await asyncio.wait_for(engine.wait(handle.run_id), 60)
        child_result = await asyncio.wait_for(engine.wait(child_id), 60)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert child_result.lifecycle is Lifecycle.CANCELLED


class CommitFaults:
    """Once ``armed``, the commits of run ``run_id`` meet a fault: ``answer lost`` - the first
    one (that ends the run, if ``ending``) is applied and its answer lost (as when PostgreSQL's
    connection breaks once ``COMMIT`` is sent); ``store down`` - those that move a token fail
    as when the store cannot be reached, as many times in a row as a step is tried."""

    def __init__(self, store: Store, run_id: str, fault: str, *, ending: bool = False) -> None:
        self.armed = False
        self.faults = 0
        commit = store.commit

        async def faulty(c: Commit) -> Sequence[EventRecord]:
            if not self.armed or c.run_id != run_id:
                return await commit(c)
            ends = c.run is not None and c.run.finished_at is not None
            if fault == "answer lost" and (ends or not ending):
                await commit(c)
                self.armed, self.faults = False, 1
                raise CommitOutcomeUnknown("the store was lost once the commit was sent")
            if fault != "store down" or not c.tokens:
                return await commit(c)
            self.faults += 1
            self.armed = self.faults < COMMIT_ATTEMPTS
            raise StoreDown("the store does not answer")

        setattr(store, "commit", faulty)  # noqa: B010 (this store object only)


async def until_started(store: Store, parent_id: str) -> str:
    """The id of the child run of ``parent_id``, once it is stored."""
    for _ in range(600):
        children = [r.id for r in await store.list_runs() if r.parent_run_id == parent_id]
        if children:
            return children[0]
        await store.wait_changed(0.05)
    raise AssertionError(f"run {parent_id!r} started no child")


async def ended_on(clock: VirtualClock, store: Store, run_id: str) -> RunRecord:
    """The run once it has ended, or as it is after an hour on ``clock``."""
    end = clock.now() + timedelta(hours=1)
    while (run := await store.get_run(run_id)).lifecycle not in ("completed", "failed"):
        if clock.now() >= end:
            break
        await clock.sleep(timedelta(seconds=1))
    return run


@pytest.mark.parametrize("fault", ["answer lost", "store down"])
@pytest.mark.parametrize("ending", ["completed", "cancelled"])
async def test_a_parent_let_go_before_it_moves_on_from_its_ended_child_is_woken_again(
    fault: str, ending: str
) -> None:
    """The child's wake stays on the parent until the step that moves the parent's token on:
    a parent rebuilt by it and let go before that step (the answer of its first commit lost,
    the store down for that step) is woken by it again, however the child ended."""
    child = approval_child()
    parent = (
        FlowBuilder("urn:test:flow:woken-again")
        .subflow("sub", child, {"success": "end", "error": "other"}, output={"answer": "answer"})
        .terminal("end", "done")
        .terminal("other", "child-ended-otherwise")
        .build()
    )
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    worker = Engine(clock=clock, store=store, flows=[parent, child], owner="worker")
    try:
        worker.sweeper  # noqa: B018
        handle = await worker.start(parent, {"order": "w7"})
        child_id = await until_parked(store, "approve:w7")
        await asyncio.wait_for(worker.wait_parked(handle.run_id), 60)
        await until_let_go(worker)
        faults = CommitFaults(store, handle.run_id, fault)
        faults.armed = True
        if ending == "completed":
            await worker.signal(key="approve:w7", payload={"answer": "yes"})
        else:
            await worker.cancel(child_id, "no longer needed")
        run = await ended_on(clock, store, handle.run_id)
        child_run = await store.get_run(child_id)
        due = await store.due_of(handle.run_id)
        history = await store.history(handle.run_id)
    finally:
        await worker.close()
        await clock.aclose()
        await store.close()
    assert faults.faults == (1 if fault == "answer lost" else COMMIT_ATTEMPTS)
    assert (child_run.lifecycle, run.lifecycle) == (ending, "completed")
    assert run.outcome == ("done" if ending == "completed" else "child-ended-otherwise")
    assert len(of_kind(history, "subflow_finished")) == 1
    assert due == []


async def test_a_parent_held_while_its_childs_end_loses_its_answer_learns_it_from_the_store() -> (
    None
):
    """The child's holder lets the child go (the answer of the commit that ended it lost) and
    tells who waits for it; the parent waiting for it reads its end from the store and moves
    on, held all along: it is not let go for it, nor are who wait for it told it failed."""
    child = slow_child_flow()
    parent = parent_of(child)
    async with running(False, flows=[parent, child]) as (engine, clock):
        handle = await engine.start(parent, {"order": "w8"})
        child_id = await until_started(engine.store, handle.run_id)
        faults = CommitFaults(engine.store, child_id, "answer lost", ending=True)
        faults.armed = True
        waiting = asyncio.ensure_future(engine.wait(handle.run_id))
        await clock.advance(timedelta(seconds=100))  # (the child's node returns)
        result = await asyncio.wait_for(waiting, 60)
        child_run = await engine.store.get_run(child_id)
    assert faults.faults == 1 and child_run.lifecycle == "completed"
    assert (result.lifecycle, result.state["answer"]) == (Lifecycle.COMPLETED, "slow")
