"""Parking and signals: a parked token holds nothing in memory; signals move it atomically."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import (
    Engine,
    Lifecycle,
    NodeContext,
    Output,
    Park,
    RefusalReason,
    SignalRefused,
)
from flowtide.model import Flow
from flowtide.store import EventRecord, ParkStatus, TokenStatus
from tests.engine.engine_helpers import T0, at, kinds, of_kind, running, two_engines

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

calls: list[tuple[str, Any]] = []


@node(outputs=["approved", "rejected"], timeout="PT1H")
async def approve(ctx: NodeContext) -> Any:
    calls.append(("approve", ctx.signal))
    if ctx.signal is None:
        ctx.state["asked"] = True
        return Park(key=f"approval-{ctx.run_id}", payload={"ask": "ok?"})
    return "approved" if ctx.signal.get("ok") else "rejected"


@node(outputs=["done"], execution="inline")
def after(ctx: NodeContext) -> str:
    ctx.state["after"] = True
    return "done"


def approval_flow(*, route_timeout: bool = True) -> Flow:
    routes = {"approved": "notify", "rejected": "no"}
    if route_timeout:
        routes["timeout"] = "late"
    builder = (
        FlowBuilder("urn:test:flow:approval")
        .task("approve", approve, routes)
        .task("notify", after, {"done": "yes"})
        .terminal("yes", "approved")
        .terminal("no", "rejected")
    )
    if route_timeout:
        builder.terminal("late", "late")
    return builder.build()


async def test_run_returns_parked_and_the_executor_lets_go() -> None:
    calls.clear()
    async with running(autojump=False) as (engine, _clock):
        result = await engine.run(approval_flow())
        assert result.lifecycle is Lifecycle.PARKED
        assert result.outcome is None
        assert result.state == {"asked": True}
        (parked,) = result.parked
        assert parked.placement == "approve"
        assert parked.key == f"approval-{result.run_id}"
        assert parked.deadline == at(3600)
        assert parked.payload == {"ask": "ok?"}
        # Nothing of the run stays in memory: no executor, no task.
        assert result.run_id not in engine.held_runs()
        run = await engine.store.get_run(result.run_id)
        assert run.lifecycle == "parked"
        (token,) = await engine.store.tokens(result.run_id)
        assert (token.status, token.deadline) == (TokenStatus.PARKED, at(3600))
        receipt = await engine.signal(result.run_id, placement="approve", output="approved")
        assert (receipt.placement, receipt.output, receipt.duplicate) == (
            "approve",
            "approved",
            False,
        )
        final = await engine.wait(result.run_id)
        history = await engine.history(result.run_id)
    assert final.lifecycle is Lifecycle.COMPLETED
    assert final.outcome == "approved"
    assert final.state == {"asked": True, "after": True}
    assert calls == [("approve", None)]  # with an output, the node does not run again
    assert kinds(history, placement="approve") == [
        "node_started",
        "parked",
        "signalled",
    ]


async def test_a_signal_without_output_runs_the_node_again_with_the_payload() -> None:
    calls.clear()
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(approval_flow())
        await clock.advance(timedelta(minutes=5))
        await engine.signal(key=f"approval-{handle.run_id}", payload={"ok": False, "by": "ann"})
        result = await handle.result()
    assert result.outcome == "rejected"
    assert result.state == {"asked": True, "ok": False, "by": "ann"}
    assert calls == [("approve", None), ("approve", {"ok": False, "by": "ann"})]


async def test_the_sweeper_fires_a_park_deadline_and_routes_timeout() -> None:
    async with running() as (engine, _clock):
        handle = await engine.start(approval_flow())
        result = await handle.result()
        history = await engine.history(result.run_id)
        (park,) = await engine.parks(result.run_id)
    assert result.outcome == "late"
    (timed_out,) = of_kind(history, "node_timed_out")
    assert timed_out.at == at(3600)
    assert (park.status, park.closed_at) == (ParkStatus.TIMED_OUT, at(3600))


async def test_an_unrouted_park_timeout_fails_the_run() -> None:
    async with running() as (engine, _clock):
        handle = await engine.start(approval_flow(route_timeout=False))
        result = await handle.result()
    assert result.lifecycle is Lifecycle.FAILED
    assert [e.type for e in result.errors] == ["NodeTimeoutError"]
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.node) == ("timeout", "approve")
    assert result.interrupted_at.at == at(3600)


@node(outputs=["parked", "ready"], execution="inline")
def seed_style(ctx: NodeContext) -> str:
    if ctx.state.get("reply"):
        return "ready"
    ctx.state["correlation_key"] = "conv-42"
    return "parked"


SEED_DOC = """
id: urn:test:flow:seed-style
version: "1"
entrypoints: {main: wait-operator}
placements:
  - id: wait-operator
    kind: task
    node: tests.engine.test_engine_parking:seed_style
    settings: {timeout: PT30M}
    routes: {ready: end, parked: end, timeout: end}
  - id: end
    kind: terminal
"""


async def test_a_document_node_parks_with_the_reserved_output_and_correlation_key() -> None:
    flow = load_flow(SEED_DOC, format="yaml")
    async with running(autojump=False) as (engine, clock):
        result = await engine.run(flow)
        assert result.lifecycle is Lifecycle.PARKED
        assert [(p.placement, p.key, p.deadline) for p in result.parked] == [
            ("wait-operator", "conv-42", at(1800))
        ]
        await clock.advance(timedelta(minutes=1))
        await engine.signal(key="conv-42", payload={"reply": "hello"})
        final = await engine.wait(result.run_id)
    assert final.lifecycle is Lifecycle.COMPLETED
    assert final.state["reply"] == "hello"


async def test_idempotent_signals_get_the_first_answer_and_change_nothing() -> None:
    calls.clear()
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(approval_flow())
        await clock.advance(timedelta(seconds=1))
        first = await engine.signal(
            handle.run_id, placement="approve", payload={"ok": True}, idempotency_key="k1"
        )
        result = await handle.result()
        history = list(await engine.history(handle.run_id))
        again = await engine.signal(
            handle.run_id, placement="approve", payload={"ok": False}, idempotency_key="k1"
        )
        assert list(await engine.history(handle.run_id)) == history
        assert await engine.store.get_state(handle.run_id) == result.state
    assert again.duplicate and not first.duplicate
    assert (again.token_id, again.at, again.park) == (first.token_id, first.at, first.park)
    assert result.outcome == "approved"


async def snapshot(engine: Any, run_id: str) -> tuple[Any, ...]:
    run = await engine.store.get_run(run_id)
    return (
        run.lifecycle,
        await engine.store.get_state(run_id),
        list(await engine.history(run_id)),
        [(t.id, t.status, t.epoch) for t in await engine.store.tokens(run_id)],
    )


async def refused(engine: Any, **signal: Any) -> SignalRefused:
    with pytest.raises(SignalRefused) as info:
        await engine.signal(**signal)
    return info.value


async def test_refusals_name_why_and_change_nothing() -> None:
    async with running(autojump=False) as (engine, clock):
        # unknown: no such run, no such placement, no such key
        for where in ({"placement": "x"}, {"key": "k"}, {"token_id": "nope.1"}):
            err = await refused(engine, run_id="nope", **where)
            assert err.reason is RefusalReason.UNKNOWN and "no run 'nope'" in str(err)
        handle = await engine.start(approval_flow())
        await clock.advance(timedelta(seconds=1))
        run_id = handle.run_id
        before = await snapshot(engine, run_id)
        err = await refused(engine, run_id=run_id, placement="notify")
        assert err.reason is RefusalReason.UNKNOWN
        assert (await refused(engine, key="no-such-key")).reason is RefusalReason.UNKNOWN
        # invalid outputs: engine outputs, undeclared ones
        for output in ("timeout", "parked", "maybe"):
            err = await refused(engine, run_id=run_id, placement="approve", output=output)
            assert err.reason is RefusalReason.INVALID_OUTPUT
        assert await snapshot(engine, run_id) == before
        # expired: after the deadline, whatever the signal asks
        await clock.advance_to(at(3603))
        late = await snapshot(engine, run_id)
        err = await refused(engine, run_id=run_id, placement="approve", output="approved")
        assert err.reason is RefusalReason.EXPIRED
        assert err.at == at(3600)
        assert str(err).endswith("expired at 01:00:00Z, 3 s before this signal")
        assert await snapshot(engine, run_id) == late


async def test_moved_on_and_cancelled_refusals() -> None:
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(approval_flow())
        await clock.advance(timedelta(seconds=10))
        await engine.signal(handle.run_id, placement="approve", output="approved")
        await handle.result()
        await clock.advance(timedelta(seconds=5))
        err = await refused(engine, run_id=handle.run_id, placement="approve")
        assert err.reason is RefusalReason.MOVED_ON
        assert err.at == at(10)
        other = await engine.start(approval_flow())
        await clock.advance(timedelta(seconds=1))
        assert await engine.cancel(other.run_id, reason="customer left")
        cancelled = await other.result()
        assert cancelled.lifecycle is Lifecycle.CANCELLED
        err = await refused(engine, key=f"approval-{other.run_id}", output="approved")
        assert err.reason is RefusalReason.CANCELLED


@node(outputs=["go"], execution="inline")
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done"])
async def park_twice(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key="same")
    return "done"


@node(outputs=["done"])
async def busy(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=1))
    return "done"


async def test_ambiguous_and_not_parked_refusals_then_token_id() -> None:
    flow = (
        FlowBuilder("urn:test:flow:two-parks")
        .task("fork", fork, {"go": ["p", "p2", "b"]})
        .task("p", park_twice, {"done": "end"})
        .task("p2", park_twice, {"done": "end"})
        .task("b", busy, {"done": "end"})
        .terminal("end")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(flow)
        await clock.advance(timedelta(seconds=1))
        assert (await refused(engine, key="same")).reason is RefusalReason.AMBIGUOUS
        err = await refused(engine, run_id=handle.run_id, placement="b")
        assert err.reason is RefusalReason.NOT_PARKED
        parks = await engine.parks(handle.run_id)
        for park in parks:
            await engine.signal(handle.run_id, token_id=park.token_id)
        await clock.advance(timedelta(minutes=1))
        result = await handle.result()
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_a_signal_to_a_token_another_engine_is_running_is_refused_as_not_parked() -> None:
    # Engine b does not hold the run (engine a does): the store says where its tokens are.
    flow = (
        FlowBuilder("urn:test:flow:busy").task("b", busy, {"done": "end"}).terminal("end").build()
    )
    async with two_engines(flow, autojump=False) as (a, b, clock, store):
        handle = await a.start(flow)
        await clock.advance(timedelta(seconds=1))
        before = await store.history(handle.run_id)
        err = await refused(b, run_id=handle.run_id, placement="b", output="done")
        assert err.reason is RefusalReason.NOT_PARKED
        assert "is not parked (it is running)" in str(err)
        # A placement with no live token is still unknown.
        assert (await refused(b, run_id=handle.run_id, placement="x")).reason is (
            RefusalReason.UNKNOWN
        )
        assert await store.history(handle.run_id) == before
        await clock.advance(timedelta(minutes=1))
        assert (await handle.result()).lifecycle is Lifecycle.COMPLETED


SELF_SIGNALS: list[RefusalReason] = []


@node(outputs=["ok"])
async def signals_itself_then_parks(ctx: NodeContext) -> Any:
    engine = ENGINES[0]
    try:
        await engine.signal(ctx.run_id, placement="p", output="ok")
    except SignalRefused as err:
        SELF_SIGNALS.append(err.reason)
    return Park()


ENGINES: list[Engine] = []


@pytest.mark.parametrize("hooked", [False, True], ids=["fast-park", "general"])
async def test_a_node_that_signals_its_own_token_before_it_parks_is_refused_as_not_parked(
    hooked: bool,
) -> None:
    # Engine.run takes the fast park for a flow whose entry node parks at once (no executor
    # while its first step runs); a hook makes it take the general path: the same refusal.
    flow = (
        FlowBuilder("urn:test:flow:self-signal")
        .task("p", signals_itself_then_parks, {"ok": "end"})
        .terminal("end")
        .build()
    )
    SELF_SIGNALS.clear()
    clock = VirtualClock(T0, autojump=True)
    hooks: list[Callable[[EventRecord], None]] = [lambda e: None] if hooked else []
    engine = Engine(clock=clock, hooks=hooks)
    ENGINES[:] = [engine]
    try:
        first = await engine.run(flow)
        assert first.parked
        assert SELF_SIGNALS == [RefusalReason.NOT_PARKED]
    finally:
        await engine.close()
        await clock.aclose()


@node(outputs=["done"])
async def collect_notes(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park()
    return Output("done", update={"notes": "from node"})


async def test_a_signal_payload_goes_through_the_reducers() -> None:
    flow = (
        FlowBuilder("urn:test:flow:reduce")
        .task("c", collect_notes, {"done": "end"})
        .terminal("end")
        .reducer("notes", "append")
        .build()
    )
    async with running(autojump=False) as (engine, _clock):
        handle = await engine.start(flow, {"notes": ["start"]})
        await engine.wait_parked(handle.run_id)
        await engine.signal(handle.run_id, placement="c", payload={"notes": "signal"})
        result = await handle.result()
    assert result.state["notes"] == ["start", "signal", "from node"]


async def test_the_run_deadline_of_a_let_go_run_is_fired_by_the_sweeper() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await engine.run(approval_flow(), deadline="PT30M")
        assert first.run_id not in engine.held_runs()
        await clock.advance(timedelta(minutes=30))
        result = await engine.wait(first.run_id)
        (park,) = await engine.parks(first.run_id)
    assert result.lifecycle is Lifecycle.TIMED_OUT
    assert result.interrupted_at is not None
    assert (result.interrupted_at.reason, result.interrupted_at.at) == ("timeout", at(1800))
    assert result.interrupted_at.node == "approve"
    assert (park.status, park.closed_by) == (ParkStatus.CANCELLED, "run_deadline")


async def test_a_parked_run_is_resumed_by_another_engine_on_the_same_store() -> None:
    async with running(autojump=False) as (engine, clock):
        first = await engine.run(approval_flow())
        async with running(autojump=False, store=engine.store) as (other, _):
            other.clock = clock
            other.register_flow(approval_flow())
            await other.signal(first.run_id, placement="approve", output="approved")
            result = await other.wait(first.run_id)
    assert result.outcome == "approved"


@node(outputs=["done"])
async def child_waits(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key="child-key")
    ctx.state["answer"] = ctx.signal["answer"]
    return "done"


async def test_a_child_run_parks_in_place_and_its_parent_goes_on_after_the_signal() -> None:
    child = (
        FlowBuilder("urn:test:flow:child")
        .task("ask", child_waits, {"done": "end"})
        .terminal("end")
        .build()
    )
    parent = (
        FlowBuilder("urn:test:flow:parent")
        .subflow("sub", child, {"success": "end"}, output={"answer": "answer"})
        .terminal("end")
        .build()
    )
    async with running(autojump=False, flows=[child]) as (engine, clock):
        handle = await engine.start(parent)
        await clock.settle()
        (park,) = await engine.store.parks(key="child-key")
        assert (await engine.store.get_run(park.run_id)).lifecycle == "parked"
        await engine.signal(key="child-key", payload={"answer": 42})
        result = await handle.result()
    assert result.state["answer"] == 42


@node(outputs=["done"], execution="inline")
def quick(ctx: NodeContext) -> str:
    return "done"


async def test_a_run_waiting_only_on_timers_is_let_go_but_run_returns_at_its_end() -> None:
    flow = (
        FlowBuilder("urn:test:flow:wait-only")
        .wait("w", "PT1H", then="q")
        .task("q", quick, {"done": "end"})
        .terminal("end")
        .build()
    )
    async with running(autojump=False) as (engine, clock):
        running_run = asyncio.create_task(engine.run(flow))
        await clock.settle()
        assert not running_run.done()  # run() does not return at a timer wait
        (run,) = await engine.store.list_runs()
        assert run.lifecycle == "parked"  # waiting on a timer is parked too
        assert run.id not in engine.held_runs()  # and let go
        await clock.advance(timedelta(hours=1))
        result = await running_run
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_handle_cancel_reaches_a_run_that_was_let_go() -> None:
    async with running(autojump=False) as (engine, _clock):
        handle = await engine.start(approval_flow())
        await engine.wait_parked(handle.run_id)
        assert handle.run_id not in engine.held_runs()
        assert handle.cancel("changed my mind")
        result = await handle.result()
    assert result.lifecycle is Lifecycle.CANCELLED
    assert [e.message for e in result.errors] == ["changed my mind"]


async def test_explain_names_the_implementation_default_and_a_node_without_window() -> None:
    async with running(autojump=False) as (engine, _clock):
        first = await engine.run(approval_flow())
        explained = await engine.explain(first.run_id, token_id=first.parked[0].token_id)
        await engine.signal(first.run_id, placement="approve", output="approved")
        await engine.wait(first.run_id)
    assert explained.timeout_source == "implementation default"
    assert explained.anchor_source == "default"
    assert (explained.anchor.value, explained.anchor_at, explained.deadline) == (
        "park",
        at(0),
        at(3600),
    )
    assert str(explained).startswith(f"token {explained.token_id} at 'approve' (parked)")


keys_seen: list[str] = []


@node(outputs=["again", "done"])
async def looping_park(ctx: NodeContext) -> Any:
    keys_seen.append(ctx.idempotency_key.split(":", 1)[1])
    return Park(key=None)


@node(outputs=["back"], execution="inline")
def bounce_back(ctx: NodeContext) -> str:
    return "back"


async def test_a_rebuild_reads_only_the_history_after_the_let_go_checkpoint() -> None:
    keys_seen.clear()
    flow = (
        FlowBuilder("urn:test:flow:park-loop")
        .task("p", looping_park, {"again": "b", "done": "end"})
        .task("b", bounce_back, {"back": "p"})
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        store = engine.store
        reads: list[int] = []
        load_run = store.load_run

        async def spy(run_id: str) -> Any:
            snapshot = await load_run(run_id)
            checkpoint = snapshot.run.checkpoint
            reads.append(checkpoint.seq if checkpoint is not None else 0)
            assert all(e.seq > reads[-1] for e in snapshot.history)
            return snapshot

        store.load_run = spy  # type: ignore[method-assign]
        first = await engine.run(flow)
        assert first.lifecycle is Lifecycle.PARKED and not engine.held_runs()
        for _ in range(2):
            await engine.signal(first.run_id, placement="p", output="again")
            await engine.wait_parked(first.run_id)
        await engine.signal(first.run_id, placement="p", output="done")
        result = await engine.wait(first.run_id)
        store.load_run = load_run  # type: ignore[method-assign]
        stored = await store.get_run(first.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED and result.terminals == ("end",)
    # Visits go on counting across rebuilds (idempotency keys stay distinct).
    assert keys_seen == ["p:1:1", "p:2:1", "p:3:1"]
    # Each rebuild (one per signal) read the history from its checkpoint on, never from the
    # start.
    assert len(reads) == 3 and all(after > 0 for after in reads)
    assert stored.checkpoint is not None and stored.checkpoint.visits["p"] == 3
