"""Sync nodes in worker threads (``execution="thread"``, the default for sync nodes).

A plain threaded task takes the executor's fast path like an async or inline one; registering
a hook (one that does nothing) sends every step through the general path, so running a flow with
and without one compares the two paths. Waits on threads are bounded by generous timeouts: safety
nets against a hang, never timing assertions.
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
from flowtide.engine import Lifecycle, NodeContext, Output, Park
from flowtide.engine.errors import EngineError
from flowtide.engine.result import ErrorInfo
from flowtide.model import Flow
from tests.engine.conftest import BranchTasks
from tests.engine.engine_helpers import comparable, no_op_hooks, run_comparable, running

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


@node(outputs=["next"])
def explode(ctx: NodeContext) -> str:
    raise ValueError("thread said no")


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


@pytest.mark.parametrize(
    ("make", "general"),
    [
        (chain, []),
        (failing, []),
        (undeclared, []),
        (parking, []),
        (lambda: split("all"), []),
        (lambda: split("first"), []),
    ],
    ids=["chain", "failing", "undeclared", "parking", "all", "first"],
)
async def test_threaded_nodes_give_the_same_history_and_state_on_both_paths(
    make: Callable[[], Flow], general: list[str], general_steps: list[str]
) -> None:
    flow = make()
    losers = [("b2", True), ("b3", True)] if "first" in flow.id else []
    # One worker: branches that run to their end finish in the order they started, on a busy
    # machine too (a first join's winner waits for the losers to be running: it needs three).
    threads = 32 if losers else 1
    LOSERS.clear()
    _drain(LOSER_STARTED)
    fast = (await run_comparable(flow, hooked=False, max_threads=threads))[0]
    await asyncio.to_thread(_until, lambda: losers == sorted(LOSERS))
    assert general_steps == general
    LOSERS.clear()
    _drain(LOSER_STARTED)
    slow = (await run_comparable(flow, hooked=True, max_threads=threads))[0]
    await asyncio.to_thread(_until, lambda: losers == sorted(LOSERS))
    assert fast == slow


async def test_a_threaded_chain_runs_on_the_fast_path(general_steps: list[str]) -> None:
    async with running() as (engine, _clock):
        result = await engine.run(chain())
        history = await engine.history(result.run_id)
    assert general_steps == []
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "shipped"
    assert result.state == {
        "visited": ["start", "b", "f"],
        "n": 3,
        "total": 2,
        "at_f": 1,
    }
    finished = [e.placement for e in history if e.kind == "node_finished"]
    assert finished == ["a", "b", "c", "c", "c", "d", "e", "f"]


async def test_a_join_loser_in_a_thread_sees_its_cancellation_and_its_result_is_dropped() -> None:
    for hooked in (False, True):
        LOSERS.clear()
        _drain(LOSER_STARTED)
        async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
            result = await engine.run(split("first"))
            history = await engine.history(result.run_id)
            await asyncio.to_thread(_until, lambda: len(LOSERS) == 2)
        assert result.lifecycle is Lifecycle.COMPLETED
        assert sorted(LOSERS) == [("b2", True), ("b3", True)]
        assert "loser_wrote" not in result.state
        cancelled = [
            (e.placement, e.data["reason"]) for e in history if e.kind == "token_cancelled"
        ]
        assert sorted(cancelled) == [("b2", "join_loser"), ("b3", "join_loser")]
        finished = [e.placement for e in history if e.kind == "node_finished"]
        assert "b2" not in finished and "b3" not in finished


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


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_an_abort_cancels_a_threaded_node_and_drops_its_late_result(
    hooked: bool, general_steps: list[str]
) -> None:
    HELD.clear()
    SEEN.clear()
    async with running(autojump=False, hooks=no_op_hooks(hooked)) as (engine, _clock):
        handle = await engine.start(holding())
        await asyncio.to_thread(HELD.wait, WAIT)
        assert handle.cancel(reason="stop")
        result = await handle.result()
        history = await engine.history(result.run_id)
        # The node returns after its cancel; nothing of it reaches the run.
        await asyncio.to_thread(_until, lambda: bool(SEEN))
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history
    assert general_steps == (["a", "h"] if hooked else [])
    assert SEEN == ["cancelled=True reason=abort"]
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.state == {"visited": ["start"]}
    assert [e.kind for e in history if e.placement == "h"] == ["node_started", "token_cancelled"]


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


async def test_closing_the_engine_does_not_wait_for_a_node_that_never_returns() -> None:
    HELD.clear()
    SEEN.clear()
    release = threading.Event()

    @node(id="test:thread:stuck", outputs=["done"])
    def stuck(ctx: NodeContext) -> str:
        HELD.set()
        release.wait(WAIT)  # ignores its cancellation
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
            await engine.close()  # returns while the node is still in its thread
            assert pool.closed
            with pytest.raises(EngineError, match="closed"):
                await handle.result()
            # The run is left in the store, to be resumed.
            assert (await engine.store.get_run(handle.run_id)).lifecycle == Lifecycle.RUNNING
    finally:
        release.set()
    await asyncio.to_thread(pool.shutdown, wait=True)


CONCURRENT = [0, 0]
CONCURRENT_LOCK = threading.Lock()
PAIRS = threading.Barrier(2, timeout=WAIT)


@node(outputs=["next"])
def pairs(ctx: NodeContext) -> str:
    with CONCURRENT_LOCK:
        CONCURRENT[0] += 1
        CONCURRENT[1] = max(CONCURRENT[1], CONCURRENT[0])
    PAIRS.wait()  # two branches at a time: the pool must run two at once, and no more
    with CONCURRENT_LOCK:
        CONCURRENT[0] -= 1
    return "next"


async def test_max_threads_bounds_the_worker_threads() -> None:
    CONCURRENT[:] = [0, 0]
    PAIRS.reset()
    b = FlowBuilder("urn:test:flow:thread-bound").task(
        "a", start, {"next": [f"b{i}" for i in range(8)]}
    )
    for i in range(8):
        b.task(f"b{i}", pairs, {"next": "j"})
    flow = b.join("j", "all", {"success": "end"}).terminal("end").build()
    async with running(max_threads=2) as (engine, _clock):
        result = await engine.run(flow)
        assert engine.threads.threads == 2
    assert result.lifecycle is Lifecycle.COMPLETED
    assert CONCURRENT[1] == 2


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


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_threaded_node_does_not_see_the_callers_context(hooked: bool) -> None:
    # As before (loop.run_in_executor): the node runs in its worker thread's own context.
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
        async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
            result = await engine.run(flow)
    finally:
        VAR.reset(token)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert CONTEXTS == [("inline", "caller"), ("thread", "unset")]


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_threaded_nodes_exception_reaches_the_engine_with_its_traceback(
    hooked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    caught: list[BaseException] = []
    original = ErrorInfo.of.__func__  # type: ignore[attr-defined]

    def spy(cls: type[ErrorInfo], exc: BaseException, placement: str | None = None) -> ErrorInfo:
        caught.append(exc)
        result: ErrorInfo = original(cls, exc, placement)
        return result

    monkeypatch.setattr(ErrorInfo, "of", classmethod(spy))
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(failing())
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.message, e.placement) for e in result.errors] == [
        ("ValueError", "thread said no", "x")
    ]
    errors = [e for e in caught if isinstance(e, ValueError)]
    assert errors
    frames = [f.name for f in traceback.extract_tb(errors[0].__traceback__)]
    assert "explode" in frames


# -- a split's threaded branches: carriers stand for their tasks ---------------------------------


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


async def _finished(engine: Any, run_id: str, placements: set[str]) -> None:
    """Wait (a bounded real-time poll, as :func:`_until`) until the run's history has a
    ``node_finished`` event at each of ``placements``."""
    for _ in range(int(WAIT * 1000)):
        history = await engine.history(run_id)
        if placements <= {e.placement for e in history if e.kind == "node_finished"}:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{sorted(placements)} did not finish")


async def _interrupted(how: str, hooked: bool) -> Any:
    """A split into threaded branches, some blocked in their node when ``how`` happens."""
    OBSERVED.clear()
    _drain(BLOCKED)
    UNBLOCK.clear()
    if how == "timeout":  # only the blocked branch's node times out; the others finish
        flow = blocked_split([visit, blocks_for_two_seconds, visit, add], how)
        blocked, free = 1, {"b0", "b2", "b3"}
    else:
        flow = blocked_split([blocks, visit, blocks, blocks], how)
        blocked, free = 3, {"b1"}
    async with running(autojump=False, hooks=no_op_hooks(hooked)) as (engine, clock):
        deadline = timedelta(seconds=5) if how == "deadline" else None
        handle = await engine.start(flow, deadline=deadline)
        for _ in range(blocked):
            assert await asyncio.to_thread(BLOCKED.acquire, True, WAIT)
        # The branches that do not block finish first (their threads may be slow to run on a
        # busy machine): what happens next meets only the blocked ones.
        await _finished(engine, handle.run_id, free)
        if how == "abort":
            assert handle.cancel(reason="stop")
        elif how == "timeout":
            await clock.advance(timedelta(seconds=2))
        elif how == "deadline":
            await clock.advance(timedelta(seconds=5))
        if how == "close":
            drivers = list(engine._runs[handle.run_id]._tasks)
            pool = engine.threads
            await engine.close()
            # The blocked branches' drivers ended with the engine (their nodes go on in their
            # threads); the run is left as it was in the store, to be resumed.
            assert len(drivers) == 3 and all(d.done() for d in drivers)
            with pytest.raises(EngineError, match="closed"):
                await handle.result()
            run = await engine.store.get_run(handle.run_id)
            assert run.lifecycle == Lifecycle.RUNNING
            history = list(await engine.history(handle.run_id))
            UNBLOCK.set()
            await asyncio.to_thread(pool.shutdown, wait=True)
            return [(e.kind, e.placement, e.at) for e in history]
        result = await handle.result()
        history = list(await engine.history(result.run_id))
        await asyncio.to_thread(_until, lambda: len(OBSERVED) == blocked)
        await asyncio.sleep(0)
        assert await engine.history(result.run_id) == history  # the late results are dropped
    return comparable(result, history), sorted(OBSERVED)


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize("how", ["timeout", "abort", "deadline", "close"])
async def test_carried_branches_are_cancelled_as_their_tasks_were(
    how: str, hooked: bool, branch_tasks: BranchTasks
) -> None:
    carried = await _interrupted(how, hooked)
    assert branch_tasks.carried == ["b0", "b1", "b2", "b3"]
    branch_tasks(True)
    tasks = await _interrupted(how, hooked)
    assert carried == tasks
    if how == "close":
        return
    (lifecycle, _outcome, state, *_rest, events), observed = carried
    assert "late" not in state
    cancelled = [(e[2], e[0]) for e in events if e[2] in ("b0", "b1", "b2", "b3")]
    if how == "timeout":
        assert lifecycle is Lifecycle.COMPLETED
        assert observed == [("b1", "node_timeout")]
        assert ("b1", "node_timed_out") in cancelled
        assert state["visited"] == ["start", "b0", "b2", "k"]
    else:
        reason = {"abort": "abort", "deadline": "run_deadline"}[how]
        assert observed == [("b0", reason), ("b2", reason), ("b3", reason)]
        assert lifecycle is (Lifecycle.CANCELLED if how == "abort" else Lifecycle.TIMED_OUT)


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


@node(outputs=["next"])
async def sets_var(ctx: NodeContext) -> str:
    # After its threaded node, a branch goes on in its own context: what it sets stays there.
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


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize(
    "make",
    [lambda: split("all"), lambda: split("first"), failing_split, context_split],
    ids=["all", "first", "failing", "context"],
)
async def test_carried_branches_give_the_histories_their_tasks_gave(
    make: Callable[[], Flow], hooked: bool, branch_tasks: BranchTasks
) -> None:
    async def once() -> Any:
        LOSERS.clear()
        _drain(LOSER_STARTED)
        CONTEXTS.clear()
        flow = make()
        # Branches that all run to their end arrive in the order their threads finish: one
        # worker makes that the order they started in, on a busy machine too. (A first join's
        # winner, and the failing branch, wait for the others to be running: they need three.)
        waiting = "first" in flow.id or "failing" in flow.id
        token = VAR.set("caller")
        try:
            threads = 32 if waiting else 1
            outcome = (await run_comparable(flow, hooked=hooked, max_threads=threads))[0]
        finally:
            VAR.reset(token)
        if waiting:
            await asyncio.to_thread(_until, lambda: len(LOSERS) == 2)
        return outcome, sorted(LOSERS), sorted(CONTEXTS)

    carried = await once()
    assert len(branch_tasks.carried) == 3
    branch_tasks(True)
    assert carried == await once()
