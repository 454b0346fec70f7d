"""A sync node's window is its code's: the engine starts no more thread-executed attempts at once
than it has threads, so an attempt never waits for a thread once started, and its timeout never
fires while it waits. With real threads and small numbers (a virtual clock stands still while a
thread runs): more runs at once than threads, each node well within its timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Output
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.model import Flow

RAN: list[str] = []
LOCK = threading.Lock()


@node(outputs=["done"], register=False)
def takes_a_while(ctx: NodeContext) -> Output:
    time.sleep(0.1)
    with LOCK:
        RAN.append(ctx.run_id)
    return Output("done", update={"ran": True})


def flow(timeout: str) -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-slots")
        .task("work", takes_a_while, {"done": "again", "timeout": "late"}, timeout=timeout)
        .task("again", takes_a_while, {"done": "end", "timeout": "late"}, timeout=timeout)
        .terminal("end", "done")
        .terminal("late", "late")
        .build()
    )


async def test_no_sync_node_times_out_waiting_for_a_thread() -> None:
    # 40 runs of two nodes, 2 threads: the last attempts wait about four seconds for a thread,
    # against a window of 1.5 s each (ample for 0.1 s of code and the loop starting 40 runs on
    # a busy machine). Before, the window ran in the pool's queue: most went late, and the
    # code of many ran all the same, its result discarded.
    RAN.clear()
    async with Engine(clock=SystemClock(), max_threads=2) as engine:
        results = await asyncio.wait_for(
            asyncio.gather(*(engine.run(flow("PT1.5S")) for _ in range(40))),
            timeout=60,
        )
    assert [r.lifecycle for r in results] == [Lifecycle.COMPLETED] * 40
    assert {r.outcome for r in results} == {"done"}
    assert all(r.state == {"ran": True} for r in results)  # none discarded
    assert sorted(RAN) == sorted(2 * [r.run_id for r in results])  # each node ran once


async def test_slots_are_given_back_to_waiters_in_turn_and_on_cancel() -> None:
    slots = ThreadSlots(1)
    assert slots.try_take() and not slots.try_take() and slots.in_use == 1
    first = asyncio.ensure_future(slots.take())
    second = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    assert slots.waiting == 2
    first.cancel()
    await asyncio.sleep(0)
    slots.give()
    await asyncio.wait_for(second, 1)
    assert slots.in_use == 1 and slots.waiting == 0
    slots.give()
    assert slots.in_use == 0 and slots.try_take()
    with pytest.raises(ValueError, match="at least one thread"):
        ThreadSlots(0)


RELEASE = threading.Event()


@node(outputs=["done"], register=False)
def holds_its_thread(ctx: NodeContext) -> str:
    RELEASE.wait(30)
    return "done"


def one(impl: Any, flow_id: str) -> Flow:
    return FlowBuilder(flow_id).task("work", impl, {"done": "end"}).terminal("end").build()


async def test_a_run_that_ends_while_its_attempt_waits_for_a_thread_ends_at_once() -> None:
    # One thread, held by another run's node: the second run's deadline ends it while its
    # attempt waits for the thread, which it never gets.
    RELEASE.clear()
    async with Engine(clock=SystemClock(), max_threads=1) as engine:
        holder = await engine.start(one(holds_its_thread, "urn:test:flow:holder"))
        await asyncio.sleep(0.1)
        waiting = await engine.start(one(takes_a_while, "urn:test:flow:waiting"), deadline="PT0.3S")
        try:
            result = await asyncio.wait_for(waiting.result(), timeout=10)
            history = await engine.history(waiting.run_id)
        finally:
            RELEASE.set()
        assert (await asyncio.wait_for(holder.result(), 10)).lifecycle is Lifecycle.COMPLETED
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert "node_started" not in [e.kind for e in history]  # (it never started)
