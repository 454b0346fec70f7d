"""The fast path of plain tasks: same history and state as the general path; still cancellable.

A plain task (its node runs on the loop or in a worker thread, no window, no timers) whose token
arrived by a commit that also started its attempt runs on the executor's fast path when no hook
is registered.
Registering a hook (one that does nothing) sends every step through the general path, so
running a flow with and without one compares the two paths.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Output, Park
from flowtide.engine import run as run_module
from flowtide.engine.plan import FlowPlan
from flowtide.engine.run import RunExecutor
from flowtide.model import Flow
from flowtide.store import EventRecord, TokenRecord
from tests.engine.engine_helpers import at, no_op_hooks, run_comparable, running


@node(outputs=["next"], execution="inline")
def begin(ctx: NodeContext) -> str:
    ctx.state["visited"] = ["begin"]
    ctx.state["tmp"] = {"drop": True}
    return "next"


@node(outputs=["done"])
async def add_five(ctx: NodeContext) -> Output:
    return Output("done", update={"total": 5})


@node(outputs=["again", "on"])
async def count(ctx: NodeContext) -> str:
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    ctx.state["visited"].append(f"count{ctx.visit}")
    return "again" if ctx.state["n"] < 3 else "on"


@node(outputs=["next"])
def threaded(ctx: NodeContext) -> str:
    ctx.state["visited"].append("threaded")
    return "next"


@node(outputs=["next"], execution="inline")
def forget(ctx: NodeContext) -> str:
    del ctx.state["tmp"]
    return "next"


@node(outputs=["done"])
async def sleepy(ctx: NodeContext) -> None:
    await ctx.clock.sleep(timedelta(seconds=1))
    ctx.state["slept"] = ctx.now().isoformat()


@node(outputs=["next"], execution="inline")
def broken(ctx: NodeContext) -> str:
    raise ValueError("no luck")


@node(outputs=["next"])
async def stray(ctx: NodeContext) -> str:
    return "sideways"


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Park:
    return Park(key=f"ask-{ctx.run_id}", payload={"q": 1})


@node(outputs=["parked", "next"], execution="inline")
def parks_by_name(ctx: NodeContext) -> str:
    ctx.state["correlation_key"] = "by-name"
    return "parked"


def chain() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-chain")
        .task("a", begin, {"next": "b"})
        .task("b", add_five, {"done": "c"})
        .task("c", count, {"again": "c", "on": "d"})
        .task("d", threaded, {"next": "e"})
        .task("e", forget, {"next": "f"})
        .task("f", sleepy, {"done": "end"})
        .terminal("end", "shipped")
        .reducer("total", "sum")
        .reducer("visited", "extend")
        .build()
    )


def failing() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-failing")
        .task("a", begin, {"next": "b"})
        .task("b", add_five, {"done": "x"})
        .task("x", broken, {"next": "end"})
        .terminal("end")
        .build()
    )


def undeclared() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-undeclared")
        .task("a", begin, {"next": "s"})
        .task("s", stray, {"next": "end"})
        .terminal("end")
        .build()
    )


def parking() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-parking")
        .task("a", begin, {"next": "p"})
        .task("p", ask, {"approved": "q"})
        .task("q", parks_by_name, {"next": "end"})
        .terminal("end")
        .build()
    )


def split() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-split")
        .task("a", begin, {"next": ["b", "c"]})
        .task("b", add_five, {"done": "j"})
        .task("c", count, {"again": "c", "on": "j"})
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .reducer("total", "sum")
        .reducer("visited", "extend")
        .build()
    )


NAPS_CANCELLED: list[str] = []


@node(outputs=["done"])
async def nap(ctx: NodeContext) -> str:
    try:
        await ctx.clock.sleep(timedelta(seconds=1))
    except asyncio.CancelledError:
        NAPS_CANCELLED.append(ctx.placement)
        raise
    ctx.state["napped"] = ctx.placement
    return "done"


@node(outputs=["done"])
async def brief(ctx: NodeContext) -> Output:
    try:
        await ctx.clock.sleep(timedelta(seconds=0.5))
    except asyncio.CancelledError:
        NAPS_CANCELLED.append(ctx.placement)
        raise
    return Output("done", update={"total": 5})


@node(outputs=["next"], execution="inline")
def mark(ctx: NodeContext) -> str:
    ctx.state["visited"].append(ctx.placement)
    return "next"


def split_join(mode: str, quorum: int | None = None) -> Flow:
    """Three branches (a short sleep, an instant loop, a longer sleep) joined by ``mode``, then a
    task: the loop wins a ``first`` join (both sleeping branches lose), the loop and the short
    sleep make a ``quorum=2`` (the longer sleep loses)."""
    return (
        FlowBuilder(f"urn:test:flow:fast-split-{mode}")
        .task("a", begin, {"next": ["b", "d", "c"]})
        .task("b", brief, {"done": "j"})
        .task("c", count, {"again": "c", "on": "j"})
        .task("d", nap, {"done": "j"})
        .join("j", mode, {"success": "e"}, quorum=quorum)
        .task("e", mark, {"next": "end"})
        .terminal("end")
        .reducer("total", "sum")
        .reducer("visited", "extend")
        .build()
    )


def nested_split() -> Flow:
    """A split inside a branch of another: the inner join is reached while the outer one is
    open, and the outer join is reached by a branch and by the inner join's token."""
    return (
        FlowBuilder("urn:test:flow:fast-nested-split")
        .task("a", begin, {"next": ["b", "s"]})
        .task("b", add_five, {"done": "oj"})
        .task("s", mark, {"next": ["s1", "s2"]})
        .task("s1", mark, {"next": "ij"})
        .task("s2", nap, {"done": "ij"})
        .join("ij", "all", {"success": "k"})
        .task("k", mark, {"next": "oj"})
        .join("oj", "all", {"success": "end"})
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
        # A move while a join is open takes the general path, and a token of an open split
        # starts its next attempt in a commit of its own (the general path's _node_step).
        (split, ["c", "c"]),
        # A branch's move to its join also records its arrival (one commit) on the fast path.
        (lambda: split_join("all"), ["c", "c"]),
        (lambda: split_join("first"), ["c", "c"]),
        (lambda: split_join("quorum", 2), ["c", "c"]),
        (nested_split, ["s1", "s2", "k"]),  # tokens of the inner split while the outer is open
    ],
    ids=["chain", "failing", "undeclared", "parking", "split", "all", "first", "quorum", "nested"],
)
async def test_the_fast_path_and_the_general_path_give_the_same_history_and_state(
    make: Callable[[], Flow], general: list[str], general_steps: list[str]
) -> None:
    flow = make()
    NAPS_CANCELLED.clear()
    fast, _ = await run_comparable(flow, hooked=False)
    cancelled = list(NAPS_CANCELLED)
    assert general_steps == general
    general_steps.clear()
    NAPS_CANCELLED.clear()
    slow, started = await run_comparable(flow, hooked=True)
    # With a hook, every attempt takes the general path (in the order their starts were
    # committed; with a branch that sleeps, the others go on meanwhile, and a join loser's
    # attempt may be cancelled before it ran).
    if "d" in started or "s2" in started:
        assert Counter(general_steps) <= Counter(started)
        assert "e" in general_steps or "k" in general_steps
    else:
        assert general_steps == started
    assert cancelled == NAPS_CANCELLED
    assert fast == slow


@pytest.mark.parametrize(("mode", "quorum"), [("first", None), ("quorum", 2)])
@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_join_loser_observes_its_cancellation_on_both_paths(
    mode: str, quorum: int | None, hooked: bool
) -> None:
    NAPS_CANCELLED.clear()
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(split_join(mode, quorum))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    losers = ["b", "d"] if mode == "first" else ["d"]
    assert sorted(NAPS_CANCELLED) == losers
    assert "napped" not in result.state
    cancelled = [e for e in history if e.kind == "token_cancelled"]
    assert sorted((e.placement, e.data["reason"], e.data["join"]) for e in cancelled) == [
        (loser, "join_loser", "j") for loser in losers
    ]
    arrived = [e.data["branch"] for e in history if e.kind == "join_arrived"]
    assert arrived == ([2] if mode == "first" else [2, 0])
    fired = [e for e in history if e.kind == "join_fired"]
    assert [(e.data["output"], e.data["arrived"]) for e in fired] == [("success", len(arrived))]


async def test_the_chain_takes_the_fast_path_and_commits_once_per_step(
    general_steps: list[str],
) -> None:
    async with running() as (engine, _clock):
        result = await engine.run(chain())
        history = await engine.history(result.run_id)
    assert general_steps == []
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "shipped"
    assert result.state == {
        "visited": ["begin", "count1", "count2", "count3", "threaded"],
        "total": 5,
        "n": 3,
        "slept": at(1).isoformat(),
    }
    assert [(e.kind, e.placement) for e in history[:4]] == [
        ("run_started", None),
        ("node_started", "a"),
        ("node_finished", "a"),
        ("node_started", "b"),
    ]
    assert history[2].data == {"output": "next", "to": ["b"]}
    assert history[3].data == {"visit": 1, "node": add_five.id, "deadline": None}
    finished = [e for e in history if e.kind == "node_finished"]
    assert [e.placement for e in finished] == ["a", "b", "c", "c", "c", "d", "e", "f"]
    reached = history[-2]
    assert (reached.kind, reached.placement, reached.data) == (
        "terminal_reached",
        "end",
        {"outcome": "shipped"},
    )
    assert [
        e.data["visit"] for e in history if e.kind == "node_started" and e.placement == "c"
    ] == [
        1,
        2,
        3,
    ]


@node(outputs=["done"])
async def hangs(ctx: NodeContext) -> str:
    try:
        await ctx.clock.sleep(timedelta(minutes=10))
    except asyncio.CancelledError:
        observed.append(f"cancelled: {ctx.cancel_reason}")
        raise
    return "done"


observed: list[str] = []


def hanging() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-hanging")
        .task("a", begin, {"next": "h"})
        .task("h", hangs, {"done": "end"})
        .terminal("end")
        .build()
    )


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_an_abort_cancels_a_node_on_the_fast_path(
    hooked: bool, general_steps: list[str]
) -> None:
    observed.clear()
    async with running(autojump=False, hooks=no_op_hooks(hooked)) as (engine, clock):
        handle = await engine.start(hanging())
        await clock.advance(timedelta(seconds=10))
        assert handle.cancel(reason="operator stop")
        await clock.advance(timedelta(seconds=1))
        result = await handle.result()
        history = await engine.history(result.run_id)
    assert general_steps == (["a", "h"] if hooked else [])
    assert observed == ["cancelled: abort"]
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.node) == ("abort", "h")
    assert result.interrupted_at.at == at(10)
    assert [(e.type, e.message) for e in result.errors] == [("RunCancelled", "operator stop")]
    assert result.state == {"visited": ["begin"], "tmp": {"drop": True}}
    assert [e.kind for e in history if e.placement == "h"] == ["node_started", "token_cancelled"]
    assert history[-1].kind == "run_finished" and history[-1].at == at(10)


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_run_deadline_cancels_a_node_on_the_fast_path(
    hooked: bool, general_steps: list[str]
) -> None:
    observed.clear()
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(hanging(), deadline=timedelta(seconds=30))
        history = await engine.history(result.run_id)
    assert general_steps == (["a", "h"] if hooked else [])
    assert observed == ["cancelled: run_deadline"]
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.node) == ("timeout", "h")
    assert result.interrupted_at.at == at(30)
    assert [e.kind for e in history if e.placement == "h"] == ["node_started", "token_cancelled"]
    assert history[-1].kind == "run_finished" and history[-1].at == at(30)


@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_branch_on_the_fast_path_arrives_at_its_join_in_its_move_commit(
    hooked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    joined: list[str] = []
    original = RunExecutor._join

    async def spy(self: RunExecutor, token: Any, p: Any) -> Any:
        joined.append(token.id)
        return await original(self, token, p)

    monkeypatch.setitem(run_module._HANDLERS, "join", spy)
    async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
        result = await engine.run(split_join("all"))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    arrivals = [e for e in history if e.kind == "join_arrived"]
    assert [e.data["branch"] for e in arrivals] == [2, 0, 1]
    # Without a hook only the looping branch (on the general path) goes through _join.
    assert len(joined) == (1 if not hooked else 3)
    for e in arrivals:
        finished = history[e.seq - 2]
        assert (finished.kind, finished.token_id, finished.data["to"]) == (
            "node_finished",
            e.token_id,
            ["j"],
        )


@pytest.mark.parametrize(
    ("make", "one_pass"),
    [
        (split, ["a"]),
        (lambda: split_join("all"), ["a"]),
        (lambda: split_join("first"), ["a"]),
        # The inner split's token is of the open outer split: its branches start one by one.
        (nested_split, ["a"]),
    ],
    ids=["split", "all", "first", "nested"],
)
@pytest.mark.parametrize("hooked", [False, True], ids=["fast", "general"])
async def test_a_split_makes_its_started_branches_in_one_pass_as_one_by_one(
    make: Callable[[], Flow],
    one_pass: list[str],
    hooked: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flow = make()
    passes: list[str] = []
    original = RunExecutor._split_started

    def spy(self: RunExecutor, token: Any, *args: Any) -> Any:
        passes.append(token.placement)
        return original(self, token, *args)

    monkeypatch.setattr(RunExecutor, "_split_started", spy)
    one, _ = await run_comparable(flow, hooked=hooked)
    assert passes == one_pass
    passes.clear()
    monkeypatch.setattr(FlowPlan, "started_nodes", lambda self, targets: None)
    by_one, _ = await run_comparable(flow, hooked=hooked)
    assert passes == []
    assert one == by_one


def split_to_a_join() -> Flow:
    """A split with a branch straight to its join, and one to a task with a timeout: neither
    starts an attempt at the split, so the split takes the one-by-one path."""
    return (
        FlowBuilder("urn:test:flow:split-to-join")
        .task("a", begin, {"next": ["b", "j"]})
        .task("b", add_five, {"done": "j"})
        .join("j", "all", {"success": "t"})
        .task("t", begin, {"next": ["u", "v"]})
        .task("u", add_five, {"done": "k"}, timeout="PT1M")
        .task("v", add_five, {"done": "k"})
        .join("k", "all", {"success": "end"})
        .terminal("end")
        .reducer("total", "sum")
        .build()
    )


async def test_a_split_whose_branches_do_not_all_start_takes_the_one_by_one_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passes: list[str] = []

    def spy(self: RunExecutor, token: Any, *args: Any) -> Any:
        passes.append(token.placement)
        raise AssertionError("not taken")

    monkeypatch.setattr(RunExecutor, "_split_started", spy)
    fast, _ = await run_comparable(split_to_a_join(), hooked=False)
    slow, _ = await run_comparable(split_to_a_join(), hooked=True)
    assert passes == []
    assert fast == slow
    assert fast[0] == Lifecycle.COMPLETED and fast[2]["total"] == 15


SEEN_CONTEXTS: list[tuple[Any, ...]] = []


@node(outputs=["next"], execution="inline")
def looks(ctx: NodeContext) -> str:
    SEEN_CONTEXTS.append(
        (
            dict(ctx.state),
            ctx.run_id,
            ctx.placement,
            ctx.attempt,
            ctx.visit,
            ctx.item,
            ctx.signal,
            ctx.idempotency_key,
            ctx.cancelled,
            ctx.cancel_reason,
            ctx.now() == ctx.clock.now(),
            repr(ctx),
        )
    )
    ctx.raise_if_cancelled()
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return "next"


async def test_a_node_on_the_fast_path_sees_the_same_context_as_on_the_general_path() -> None:
    flow = (
        FlowBuilder("urn:test:flow:fast-context")
        .task("a", looks, {"next": "b"})
        .task("b", looks, {"next": "end"})
        .terminal("end")
        .build()
    )
    seen = []
    for hooked in (False, True):
        SEEN_CONTEXTS.clear()
        async with running(hooks=no_op_hooks(hooked)) as (engine, _clock):
            result = await engine.run(flow, run_id="r-ctx")
        assert result.state == {"n": 2}
        seen.append(list(SEEN_CONTEXTS))
    assert seen[0] == seen[1] and len(seen[0]) == 2


def test_the_fast_path_sets_every_field_of_the_records_it_makes_without_init() -> None:
    # RunExecutor._fast_task sets these fields one by one: a new field needs setting there too.
    assert [f.name for f in dataclasses.fields(EventRecord)] == [
        "kind",
        "run_id",
        "at",
        "placement",
        "attempt",
        "token_id",
        "data",
        "seq",
    ]
    assert [f.name for f in dataclasses.fields(TokenRecord)] == [
        "id",
        "run_id",
        "placement",
        "status",
        "attempt",
        "visit",
        "lineage",
        "deadline",
        "due",
        "created_at",
        "data",
        "epoch",
    ]
    assert set(NodeContext.__slots__) == {
        "_scope",
        "attempt",
        "clock",
        "item",
        "placement",
        "run_id",
        "signal",
        "state",
        "visit",
    }
