"""Sync nodes in worker threads (``execution="thread"``, the default for sync nodes).

A threaded node's result, failure or park reaches the run as an async node's would; its
cancellation (a join it lost, an abort, a run deadline, its own timeout) is a flag it sees,
and whatever it returns after it is dropped. ``max_threads`` bounds the workers, a threaded
node runs in its worker thread's own ``contextvars`` context, and closing the engine does not
wait for a node that never returns. A split's branches whose node runs in a thread go on in
their own context and arrive after the branches on the loop. A hook changes nothing of it.
Waits on threads are bounded by generous timeouts: safety nets against a hang, never timing
assertions.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine import Engine, EngineError, Lifecycle, NodeContext, Output, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import (
    branches_finished,
    inline,
    instant,
    run_comparable,
    running,
    split_of,
)

WAIT = 10.0


@node(outputs=["next"], execution="inline")
def start(ctx: NodeContext) -> str:
    ctx.state["visited"] = ["start"]
    return "next"


@node(outputs=["next"])
def visit(ctx: NodeContext) -> str:
    ctx.state["visited"].append(ctx.placement)
    ctx.state[f"at_{ctx.placement}"] = ctx.visit
    return "next"


@node(outputs=["again", "on"])
def loop_three(ctx: NodeContext) -> str:
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return "again" if ctx.state["n"] < 3 else "on"


@node(outputs=["done"])
def add(ctx: NodeContext) -> Output:
    return Output("done", update={"total": 2})


@node(outputs=["done"])
def quiet(ctx: NodeContext) -> None:
    ctx.state.pop("at_b", None)


class TracedError(ValueError):
    """Its message names the functions of its traceback, as they are when the engine reads it."""

    def __str__(self) -> str:
        frames = [f.name for f in traceback.extract_tb(self.__traceback__)]
        return f"thread said no (in {', '.join(frames)})"


@node(outputs=["next"])
def explode(ctx: NodeContext) -> str:
    raise TracedError


@node(outputs=["next"])
def wanders(ctx: NodeContext) -> str:
    return "elsewhere"


@node(outputs=["approved"])
def asks(ctx: NodeContext) -> Park:
    return Park(key=f"asks-{ctx.run_id}", payload={"q": 2})


def chain() -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-chain")
        .task("a", start, {"next": "b"})
        .task("b", visit, {"next": "c"})
        .task("c", loop_three, {"again": "c", "on": "d"})
        .task("d", add, {"done": "e"})
        .task("e", quiet, {"done": "f"})
        .task("f", visit, {"next": "end"})
        .terminal("end", "shipped")
        .reducer("total", "sum")
        .reducer("visited", "extend")
        .build()
    )


def failing() -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-failing")
        .task("a", start, {"next": "b"})
        .task("b", visit, {"next": "x"})
        .task("x", explode, {"next": "end"})
        .terminal("end")
        .build()
    )


def undeclared() -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-undeclared")
        .task("a", start, {"next": "w"})
        .task("w", wanders, {"next": "end"})
        .terminal("end")
        .build()
    )


def parking() -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-parking")
        .task("a", start, {"next": "b"})
        .task("b", visit, {"next": "p"})
        .task("p", asks, {"approved": "end"})
        .terminal("end")
        .build()
    )


LOSERS: list[tuple[str, bool]] = []
LOSER_STARTED = threading.Semaphore(0)


@node(outputs=["next"])
def wins(ctx: NodeContext) -> str:
    # Both losers run (in other workers) before the join fires.
    assert LOSER_STARTED.acquire(timeout=WAIT) and LOSER_STARTED.acquire(timeout=WAIT)
    ctx.state["visited"].append(ctx.placement)
    return "next"


@node(outputs=["done"])
def waits_to_lose(ctx: NodeContext) -> str:
    """Blocks until its scope is cancelled (it loses the join), then returns anyway: its late
    result and its state change must be dropped."""
    LOSER_STARTED.release()
    cancelled = ctx.wait_cancelled(WAIT)
    LOSERS.append((ctx.placement, cancelled))
    ctx.state["loser_wrote"] = True
    return "done"


def split(mode: str) -> Flow:
    b = FlowBuilder(f"urn:test:flow:thread-split-{mode}").task(
        "a", start, {"next": ["b1", "b2", "b3"]}
    )
    b.task("b1", wins if mode == "first" else visit, {"next": "j"})
    b.task("b2", waits_to_lose if mode == "first" else add, {"done": "j"})
    b.task(
        "b3",
        waits_to_lose if mode == "first" else visit,
        {"done" if mode == "first" else "next": "j"},
    )
    return (
        b.join("j", mode, {"success": "k"})
        .task("k", visit, {"next": "end"})
        .terminal("end")
        .reducer("total", "sum")
        .reducer("visited", "extend")
        .build()
    )


@node(outputs=["next"])
def explodes_once_both_run(ctx: NodeContext) -> str:
    # Both other branches are in their nodes (in other workers) when this one fails: the run's
    # failure cancels them, whatever the machine's speed.
    assert LOSER_STARTED.acquire(timeout=WAIT) and LOSER_STARTED.acquire(timeout=WAIT)
    raise ValueError("thread said no")


def failing_split() -> Flow:
    b = FlowBuilder("urn:test:flow:thread-split-failing").task(
        "a", start, {"next": ["b1", "b2", "b3"]}
    )
    b.task("b1", waits_to_lose, {"done": "j"}).task("b2", explodes_once_both_run, {"next": "j"})
    b.task("b3", waits_to_lose, {"done": "j"})
    return b.join("j", "all", {"success": "end"}).terminal("end").build()


def _drain(semaphore: threading.Semaphore) -> None:
    while semaphore.acquire(blocking=False):
        pass


def _until(predicate: Callable[[], bool]) -> None:
    event = threading.Event()
    for _ in range(int(WAIT * 1000)):
        if predicate():
            return
        event.wait(0.001)
    raise AssertionError("condition not reached")


def _reset_losers() -> None:
    LOSERS.clear()
    _drain(LOSER_STARTED)


async def test_a_chain_of_threaded_nodes_runs_to_its_terminal() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(chain())
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "shipped"
    assert result.state == {
        "visited": ["start", "b", "f"],
        "n": 3,
        "total": 2,
        "at_f": 1,
    }
    finished = [e.placement for e in history if e.kind == "node_finished"]
    assert finished == ["a", "b", "c", "c", "c", "d", "e", "f"]


async def test_a_threaded_nodes_undeclared_output_fails_the_run_at_its_placement() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(undeclared())
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.placement) for e in result.errors] == [("UndeclaredOutputError", "w")]


async def test_a_threaded_node_parks() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(parking())
        await engine.cancel(result.run_id)
    assert result.lifecycle is Lifecycle.PARKED
    assert result.state == {"visited": ["start", "b"], "at_b": 1}
    assert [(p.placement, p.key, p.payload) for p in result.parked] == [
        ("p", f"asks-{result.run_id}", {"q": 2})
    ]


async def test_a_threaded_nodes_exception_reaches_the_engine_with_its_traceback() -> None:
    # The error's message lists its traceback's functions when the engine reads it: the
    # node's own frame is there.
    async with running() as (engine, _clock):
        result = await engine.run(failing())
    assert result.lifecycle is Lifecycle.FAILED
    ((kind, message, placement),) = [(e.type, e.message, e.placement) for e in result.errors]
    assert (kind, placement) == ("TracedError", "x")
    assert message.startswith("thread said no (in ") and "explode" in message


async def test_a_join_loser_in_a_thread_sees_its_cancellation_and_its_result_is_dropped() -> None:
    _reset_losers()
    async with running() as (engine, _clock):
        result = await engine.run(split("first"))
        history = await engine.history(result.run_id)
        await asyncio.to_thread(_until, lambda: len(LOSERS) == 2)
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history
    assert result.lifecycle is Lifecycle.COMPLETED
    assert sorted(LOSERS) == [("b2", True), ("b3", True)]
    assert "loser_wrote" not in result.state
    cancelled = [(e.placement, e.data["reason"]) for e in history if e.kind == "token_cancelled"]
    assert sorted(cancelled) == [("b2", "join_loser"), ("b3", "join_loser")]
    finished = [e.placement for e in history if e.kind == "node_finished"]
    assert "b2" not in finished and "b3" not in finished


async def test_a_threaded_branchs_failure_cancels_the_other_threaded_branches() -> None:
    _reset_losers()
    async with running() as (engine, _clock):
        result = await engine.run(failing_split())
        history = await engine.history(result.run_id)
        await asyncio.to_thread(_until, lambda: len(LOSERS) == 2)
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.message, e.placement) for e in result.errors] == [
        ("ValueError", "thread said no", "b2")
    ]
    assert sorted(LOSERS) == [("b1", True), ("b3", True)]
    assert "loser_wrote" not in result.state
    finished = [e.placement for e in history if e.kind == "node_finished"]
    assert finished == ["a"]


HELD = threading.Event()
SEEN: list[str] = []


@node(outputs=["done"])
def holds(ctx: NodeContext) -> str:
    HELD.set()
    ctx.wait_cancelled(WAIT)
    SEEN.append(f"cancelled={ctx.cancelled} reason={ctx.cancel_reason}")
    ctx.state["late"] = True
    return "done"


def holding() -> Flow:
    return (
        FlowBuilder("urn:test:flow:thread-holding")
        .task("a", start, {"next": "h"})
        .task("h", holds, {"done": "end"})
        .terminal("end")
        .build()
    )


async def test_an_abort_cancels_a_threaded_node_and_drops_its_late_result() -> None:
    HELD.clear()
    SEEN.clear()
    async with running(autojump=False) as (engine, _clock):
        handle = await engine.start(holding())
        await asyncio.to_thread(HELD.wait, WAIT)
        assert handle.cancel(reason="stop")
        result = await handle.result()
        history = await engine.history(result.run_id)
        # The node returns after its cancel; nothing of it reaches the run.
        await asyncio.to_thread(_until, lambda: bool(SEEN))
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history
    assert SEEN == ["cancelled=True reason=abort"]
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.state == {"visited": ["start"]}
    assert [e.kind for e in history if e.placement == "h"] == ["node_started", "token_cancelled"]


async def test_closing_the_engine_does_not_wait_for_a_node_that_never_returns() -> None:
    HELD.clear()
    release = threading.Event()
    returned = threading.Event()

    @node(id="test:thread:stuck", outputs=["done"])
    def stuck(ctx: NodeContext) -> str:
        HELD.set()
        release.wait(WAIT)  # ignores its cancellation
        returned.set()
        return "done"

    flow = (
        FlowBuilder("urn:test:flow:thread-stuck")
        .task("s", stuck, {"done": "end"})
        .terminal("end")
        .build()
    )
    try:
        async with running(autojump=False) as (engine, _clock):
            handle = await engine.start(flow)
            await asyncio.to_thread(HELD.wait, WAIT)
            pool = engine.threads
            await engine.close()
            # close() returned while the node is still in its thread; the workers take no more.
            assert not returned.is_set()
            with pytest.raises(RuntimeError):
                pool.start(int, lambda _v, _e: None)
            with pytest.raises(EngineError, match="closed"):
                await handle.result()
            # The run is left in the store, to be resumed.
            assert (await engine.store.get_run(handle.run_id)).lifecycle == Lifecycle.RUNNING
    finally:
        release.set()
    await asyncio.to_thread(pool.shutdown, wait=True)
    assert returned.is_set()


CONCURRENT = [0, 0]
CONCURRENT_LOCK = threading.Lock()
PAIRS = threading.Barrier(2, timeout=WAIT)
WORKERS: set[int] = set()


@node(outputs=["next"])
def pairs(ctx: NodeContext) -> str:
    with CONCURRENT_LOCK:
        WORKERS.add(threading.get_ident())
        CONCURRENT[0] += 1
        CONCURRENT[1] = max(CONCURRENT[1], CONCURRENT[0])
    PAIRS.wait()  # two branches at a time: the workers must run two at once, and no more
    with CONCURRENT_LOCK:
        CONCURRENT[0] -= 1
    return "next"


async def test_max_threads_bounds_the_worker_threads() -> None:
    CONCURRENT[:] = [0, 0]
    WORKERS.clear()
    PAIRS.reset()
    b = FlowBuilder("urn:test:flow:thread-bound").task(
        "a", start, {"next": [f"b{i}" for i in range(8)]}
    )
    for i in range(8):
        b.task(f"b{i}", pairs, {"next": "j"})
    flow = b.join("j", "all", {"success": "end"}).terminal("end").build()
    async with running(max_threads=2) as (engine, _clock):
        result = await engine.run(flow)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert CONCURRENT[1] == 2
    assert len(WORKERS) == 2


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")
CONTEXTS: list[tuple[str, str]] = []


@node(outputs=["next"])
def reads_var_in_thread(ctx: NodeContext) -> str:
    CONTEXTS.append(("thread", VAR.get()))
    return "next"


@node(outputs=["next"], execution="inline")
def reads_var_inline(ctx: NodeContext) -> str:
    CONTEXTS.append(("inline", VAR.get()))
    return "next"


async def test_a_threaded_node_sees_a_copy_of_its_runs_context() -> None:
    # As with asyncio.to_thread: the node runs in a copy of the context of the task that
    # drives it (itself a copy of the caller's), like an async or inline node.
    CONTEXTS.clear()
    flow = (
        FlowBuilder("urn:test:flow:thread-context")
        .task("i", reads_var_inline, {"next": "t"})
        .task("t", reads_var_in_thread, {"next": "end"})
        .terminal("end")
        .build()
    )
    token = VAR.set("caller")
    try:
        async with running() as (engine, _clock):
            result = await engine.run(flow)
    finally:
        VAR.reset(token)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert CONTEXTS == [("inline", "caller"), ("thread", "caller")]


@node(outputs=["next"])
async def sets_var(ctx: NodeContext) -> str:
    CONTEXTS.append((ctx.placement, VAR.get()))
    VAR.set(ctx.placement)
    return "next"


def context_split() -> Flow:
    b = FlowBuilder("urn:test:flow:thread-split-context").task(
        "a", start, {"next": ["b1", "b2", "b3"]}
    )
    for i in (1, 2, 3):
        b.task(f"b{i}", reads_var_in_thread, {"next": f"s{i}"})
        b.task(f"s{i}", sets_var, {"next": f"r{i}"})
        b.task(f"r{i}", sets_var, {"next": "j"})
    return b.join("j", "all", {"success": "end"}).terminal("end").build()


async def test_after_its_threaded_node_a_branch_goes_on_in_its_own_context() -> None:
    # Each branch starts from the caller's context: what a node on the loop sets there is seen
    # by the next node of the same branch, never by another branch.
    CONTEXTS.clear()
    token = VAR.set("caller")
    try:
        async with running() as (engine, _clock):
            result = await engine.run(context_split())
    finally:
        VAR.reset(token)
    assert result.lifecycle is Lifecycle.COMPLETED
    on_loop = sorted(c for c in CONTEXTS if c[0] != "thread")
    assert on_loop == [
        ("r1", "s1"),
        ("r2", "s2"),
        ("r3", "s3"),
        ("s1", "caller"),
        ("s2", "caller"),
        ("s3", "caller"),
    ]


# -- a split's threaded branches among others ----------------------------------------------------


@node(outputs=["done"])
async def sleeps(ctx: NodeContext) -> Output:
    """Waits 2 s on the virtual clock (which does not move while a node runs in a thread)."""
    await ctx.clock.sleep(timedelta(seconds=2))
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"])
def threaded(ctx: NodeContext) -> Output:
    return Output("done", update={"visited": [ctx.placement]})


THREADED_MIX: list[NodeImplementation] = [instant, threaded, sleeps, threaded, inline, threaded]


@pytest.mark.parametrize(
    ("mode", "quorum", "expected"),
    [
        ("all", None, ["b0", "b4", "b1", "b3", "b5", "b2"]),
        ("first", None, ["b0"]),
        ("quorum", 3, ["b0", "b4", "b1"]),
    ],
    ids=["all", "first", "q3"],
)
async def test_threaded_branches_arrive_after_the_branches_on_the_loop(
    mode: str, quorum: int | None, expected: list[str]
) -> None:
    # One worker: the threaded branches finish in the order they started, on a busy machine
    # too. The sleeper wakes only once no node runs in a thread.
    async with running(max_threads=1) as (engine, _clock):
        result = await engine.run(split_of(THREADED_MIX, mode, quorum))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    if mode == "all":
        assert branches_finished(history) == expected
        assert result.state["visited"] == ["fork", *expected, "after"]
        return
    # The join's winners; other branches may have finished their node before it fired.
    (fired,) = [e for e in history if e.kind == "join_fired"]
    assert [f"b{b}" for b in fired.data["branches"]] == expected
    assert branches_finished(history)[: len(expected)] == expected
    assert result.state["visited"][-1] == "after"


async def test_with_several_workers_too_the_branches_on_the_loop_arrive_first() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(split_of([instant, threaded, sleeps, inline, threaded]))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    finished = branches_finished(history)
    assert finished[:2] == ["b0", "b3"]
    assert sorted(finished[2:4]) == ["b1", "b4"] and finished[4:] == ["b2"]


# -- threaded branches blocked in their node when the run is interrupted --------------------------


BLOCKED = threading.Semaphore(0)
UNBLOCK = threading.Event()
OBSERVED: list[tuple[str, str | None]] = []


@node(outputs=["done"])
def blocks(ctx: NodeContext) -> str:
    """Blocks until its scope is cancelled, then returns anyway (its late result is dropped)."""
    BLOCKED.release()
    for _ in range(int(WAIT * 1000)):
        if ctx.cancelled or UNBLOCK.is_set():  # UNBLOCK: the engine was closed
            break
        UNBLOCK.wait(0.001)
    OBSERVED.append((ctx.placement, ctx.cancel_reason))
    ctx.state["late"] = True
    return "done"


@node(outputs=["done"], timeout="PT2S")
def blocks_for_two_seconds(ctx: NodeContext) -> str:
    return blocks.fn(ctx)  # type: ignore[no-any-return]


def blocked_split(kinds: list[Any], name: str) -> Flow:
    names = [f"b{i}" for i in range(len(kinds))]
    b = FlowBuilder(f"urn:test:flow:thread-blocked-{name}").task("a", start, {"next": names})
    for branch, impl in zip(names, kinds, strict=True):
        b.task(branch, impl, dict.fromkeys(impl.outputs, "j") | {"timeout": "j"})
    return (
        b.join("j", "all", {"success": "k"})
        .task("k", visit, {"next": "end"})
        .terminal("end", "shipped")
        .reducer("visited", "extend")
        .build()
    )


async def _finished(engine: Engine, run_id: str, placements: set[str]) -> None:
    """Wait (a bounded real-time poll, as :func:`_until`) until the run's history has a
    ``node_finished`` event at each of ``placements``."""
    for _ in range(int(WAIT * 1000)):
        history = await engine.history(run_id)
        if placements <= {e.placement for e in history if e.kind == "node_finished"}:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{sorted(placements)} did not finish")


@pytest.mark.parametrize("how", ["timeout", "abort", "deadline", "close"])
async def test_threaded_branches_blocked_in_their_node_are_cancelled(how: str) -> None:
    """A split into threaded branches, some blocked in their node when their node times out
    (only that one), the run is cancelled, its deadline passes or the engine is closed."""
    OBSERVED.clear()
    _drain(BLOCKED)
    UNBLOCK.clear()
    if how == "timeout":  # only the blocked branch's node times out; the others finish
        flow = blocked_split([visit, blocks_for_two_seconds, visit, add], how)
        blocked, free = 1, {"b0", "b2", "b3"}
    else:
        flow = blocked_split([blocks, visit, blocks, blocks], how)
        blocked, free = 3, {"b1"}
    async with running(autojump=False) as (engine, clock):
        deadline = timedelta(seconds=5) if how == "deadline" else None
        handle = await engine.start(flow, deadline=deadline)
        for _ in range(blocked):
            assert await asyncio.to_thread(BLOCKED.acquire, True, WAIT)
        # The branches that do not block finish first (their threads may be slow to run on a
        # busy machine): what happens next meets only the blocked ones.
        await _finished(engine, handle.run_id, free)
        if how == "close":
            pool = engine.threads
            await engine.close()
            # The blocked nodes go on in their threads; the run is left as it was in the
            # store, to be resumed.
            with pytest.raises(EngineError, match="closed"):
                await handle.result()
            run = await engine.store.get_run(handle.run_id)
            assert run.lifecycle == Lifecycle.RUNNING
            history = list(await engine.history(handle.run_id))
            UNBLOCK.set()
            await asyncio.to_thread(pool.shutdown, wait=True)
            assert list(await engine.history(handle.run_id)) == history
            assert sorted(OBSERVED) == [("b0", None), ("b2", None), ("b3", None)]
            return
        if how == "abort":
            assert handle.cancel(reason="stop")
        elif how == "timeout":
            await clock.advance(timedelta(seconds=2))
        elif how == "deadline":
            await clock.advance(timedelta(seconds=5))
        result = await handle.result()
        history = list(await engine.history(result.run_id))
        await asyncio.to_thread(_until, lambda: len(OBSERVED) == blocked)
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history  # the late results are dropped
    assert "late" not in result.state
    if how == "timeout":
        assert result.lifecycle is Lifecycle.COMPLETED
        assert OBSERVED == [("b1", "node_timeout")]
        assert ("node_timed_out", "b1") in [(e.kind, e.placement) for e in history]
        # (b0 and b2 run in threads of their own: either may finish first)
        visited = result.state["visited"]
        assert visited[0] == "start" and sorted(visited[1:3]) == ["b0", "b2"]
        assert visited[3:] == ["k"]
    else:
        reason = {"abort": "abort", "deadline": "run_deadline"}[how]
        assert sorted(OBSERVED) == [("b0", reason), ("b2", reason), ("b3", reason)]
        expected = Lifecycle.CANCELLED if how == "abort" else Lifecycle.TIMED_OUT
        assert result.lifecycle is expected


# -- a hook changes nothing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        chain,
        failing,
        undeclared,
        parking,
        lambda: split("all"),
        lambda: split("first"),
        failing_split,
        context_split,
        lambda: split_of(THREADED_MIX),
        lambda: split_of(THREADED_MIX, "first"),
        # (Not a quorum of threaded branches: whether a loser's thread finishes before the
        # quorum fires is up to the threads, hook or not.)
    ],
    ids=[
        "chain",
        "failing",
        "undeclared",
        "parking",
        "all",
        "first",
        "failing-split",
        "context-split",
        "mix-all",
        "mix-first",
    ],
)
async def test_a_hook_changes_nothing_in_the_history_of_threaded_nodes(
    make: Callable[[], Flow],
) -> None:
    flow = make()
    # Branches that all run to their end arrive in the order their threads finish: one worker
    # makes that the order they started in, on a busy machine too. (A first join's winner and
    # the failing branch wait for the two others to be running: they need three.)
    waiting = flow.id.endswith(("split-first", "split-failing"))
    threads = 32 if waiting else 1

    async def once(hooked: bool) -> Any:
        _reset_losers()
        CONTEXTS.clear()
        token = VAR.set("caller")
        try:
            outcome, _ = await run_comparable(flow, hooked=hooked, max_threads=threads)
        finally:
            VAR.reset(token)
        # Threads finish in their own order, which can differ from run to run: compare what
        # happened, not in which order.
        lifecycle, end, state, errors, interrupted, parked, terminals, events = outcome
        state = {k: sorted(map(str, v)) if isinstance(v, list) else v for k, v in state.items()}
        outcome = (lifecycle, end, state, errors, interrupted, parked, sorted(terminals))
        outcome = (*outcome, sorted((k, p) for k, _at, p, *_rest in events))
        if waiting:
            await asyncio.to_thread(_until, lambda: len(LOSERS) == 2)
        return outcome, sorted(LOSERS), sorted(CONTEXTS)

    assert await once(hooked=True) == await once(hooked=False)
