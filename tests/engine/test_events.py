"""Typed event payloads: one schema per event kind, built in one place, read back from history."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import (
    EventKind,
    EventPayload,
    HookFailed,
    JoinArrived,
    JoinFired,
    Lifecycle,
    NodeContext,
    NodeFailed,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    NodeTimedOut,
    Park,
    Parked,
    ProcessStarted,
    RunFinished,
    RunStarted,
    RunWarning,
    ScatterItemFinished,
    Signalled,
    SubflowFinished,
    SubflowStarted,
    TerminalReached,
    TimerFired,
    TokenCancelled,
    WaitStarted,
    data_of,
    payload_of,
)
from flowtide.engine.event_types import PAYLOADS
from flowtide.model import Flow
from flowtide.store import EventRecord
from tests.engine.engine_helpers import T0, at, kinds, of_kind, running

AT = "2026-01-01T00:10:00+00:00"

SAMPLES: list[EventPayload] = [
    RunStarted(flow="urn:f", version="2", deadline=AT),
    NodeStarted(visit=2, kind="scatter", deadline=AT, node="m:f", phase="pre", subflow="urn:child"),
    ProcessStarted(pid=4242),
    NodeFinished(output="ok", to=["a", "b"], items=3, succeeded=2, failed=1, started=3),
    NodeFailed(
        error={
            "type": "ValueError",
            "message": "boom",
            "details": {"field": 1},
            "traceback": "Traceback (most recent call last):\n...",
        },
        to=["handled"],
    ),
    NodeTimedOut(budget=60.0, routed=True, deadline=AT, to=["late"]),
    NodeRetried(due=AT, next_attempt=2, delay=10.0, error="ConnectionError"),
    WaitStarted(due=AT),
    TimerFired(
        purpose="timer", output="remind", index=0, anchor="park", interrupting=False, to=["r"]
    ),
    JoinArrived(split="r.1/a#1", branch=1),
    JoinFired(output="success", arrived=2, branches=[1, 0], to=["next"]),
    ScatterItemFinished(index=3, output="error", status="failed"),
    SubflowStarted(child="r.2"),
    SubflowFinished(
        child="r.2", lifecycle="completed", outcome="done", output="success", to=["after"]
    ),
    TerminalReached(outcome="approved"),
    TokenCancelled(reason="join_loser", join="gather"),
    RunWarning(message="cannot fire", purpose="timeout", due=AT),
    HookFailed(hook="audit", event="node_started", error="RuntimeError: no"),
    RunFinished(
        lifecycle="failed",
        outcome=None,
        errors=[
            {
                "type": "ValueError",
                "message": "boom",
                "placement": "a",
                "details": {},
                "traceback": None,
            }
        ],
        sender="ops",
    ),
    Parked(key="order-1", deadline=AT, park="r.1#2"),
    Signalled(
        output="approved", idempotency_key="k", keys=["ok"], park="r.1#2", to=["next"], sender="ops"
    ),
]


def record(payload: EventPayload) -> EventRecord:
    return EventRecord(payload.KIND.value, "r", T0, data=data_of(payload))


def optional_fields(payload: EventPayload) -> list[str]:
    return [f.name for f in dataclasses.fields(payload) if f.default is None]


def test_every_kind_has_one_payload_class() -> None:
    assert set(PAYLOADS) == set(EventKind)
    assert sorted(type(p).__name__ for p in SAMPLES) == sorted(
        c.__name__ for c in PAYLOADS.values()
    )
    for kind, cls in PAYLOADS.items():
        assert cls.KIND is kind
        assert cls.__doc__


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type(p).__name__)
def test_every_payload_round_trips_through_its_stored_data(payload: EventPayload) -> None:
    data = data_of(payload)
    assert list(data) == [f.name for f in dataclasses.fields(payload)]
    assert payload_of(record(payload)) == payload
    assert payload_of(record(payload), type(payload)) == payload


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type(p).__name__)
def test_optional_fields_are_left_out_while_none_and_read_back_as_none(
    payload: EventPayload,
) -> None:
    optional = optional_fields(payload)
    bare = dataclasses.replace(payload, **dict.fromkeys(optional))
    data = data_of(bare)
    assert not set(optional) & set(data)
    assert set(data) == {f.name for f in dataclasses.fields(payload)} - set(optional)
    assert payload_of(record(bare)) == bare


def test_required_fields_are_written_even_when_none() -> None:
    assert data_of(RunStarted(flow="f", version="1", deadline=None)) == {
        "flow": "f",
        "version": "1",
        "deadline": None,
    }


def test_reading_ignores_unknown_keys_and_refuses_what_it_cannot_read() -> None:
    later = EventRecord("wait_started", "r", T0, data={"due": AT, "added_later": 1})
    assert payload_of(later) == WaitStarted(due=AT)
    assert later.data["added_later"] == 1  # the record keeps it
    with pytest.raises(ValueError, match="without due"):
        payload_of(EventRecord("wait_started", "r", T0, data={}))
    with pytest.raises(ValueError, match="unknown event kind 'nope'"):
        payload_of(EventRecord("nope", "r", T0))
    with pytest.raises(ValueError, match="not a NodeFinished"):
        payload_of(record(WaitStarted(due=AT)), NodeFinished)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"visit": 1, "node": "m:f", "deadline": None},
            NodeStarted(visit=1, kind="task", deadline=None, node="m:f"),
        ),
        ({"visit": 2, "scatter": True}, NodeStarted(visit=2, kind="scatter", deadline=None)),
        (
            {"visit": 1, "subflow": "urn:c"},
            NodeStarted(visit=1, kind="subflow", deadline=None, subflow="urn:c"),
        ),
        (
            {"visit": 1, "phase": "post", "node": "m:t"},
            NodeStarted(visit=1, kind="phase", deadline=None, node="m:t", phase="post"),
        ),
    ],
)
def test_the_older_node_started_shapes_still_read(data: dict[str, Any], expected: Any) -> None:
    assert payload_of(EventRecord("node_started", "r", T0, data=data)) == expected


def test_the_older_join_fired_and_phase_timeout_shapes_still_read() -> None:
    alone = EventRecord("join_fired", "r", T0, data={"output": "success", "arrived": 1})
    assert payload_of(alone) == JoinFired(output="success", arrived=1, branches=[])
    phase = EventRecord("node_timed_out", "r", T0, data={"budget": 5.0, "routed": False})
    assert payload_of(phase) == NodeTimedOut(budget=5.0, routed=False)


def test_an_older_node_failed_reads_with_empty_details_and_no_traceback() -> None:
    error = {"type": "ValueError", "message": "boom"}
    older = EventRecord("node_failed", "r", T0, data={"error": error})
    assert payload_of(older) == NodeFailed(
        error={"type": "ValueError", "message": "boom", "details": {}, "traceback": None}
    )
    assert older.data == {"error": {"type": "ValueError", "message": "boom"}}  # left as stored


# -- a run through most kinds --------------------------------------------------------------------


@node(outputs=["done"], execution="inline")
def setup(ctx: NodeContext) -> None:
    ctx.state["ready"] = True


@node(outputs=["next"], execution="inline")
def flaky(ctx: NodeContext) -> str:
    if ctx.attempt == 1:
        raise ConnectionError("try again")
    return "next"


@node(outputs=["approved"])
async def approve(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=f"approve-{ctx.run_id}")
    return "approved"


@node(outputs=["sent"], execution="inline")
def remind(ctx: NodeContext) -> str:
    return "sent"


@node(outputs=["done"], execution="inline")
def double(ctx: NodeContext) -> None:
    ctx.state["doubled"] = ctx.item * 2


@node(outputs=["done"], execution="inline")
def child_step(ctx: NodeContext) -> None:
    ctx.state["child"] = True


@node(outputs=["done"])
async def slow(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=2))
    return "done"


@node(outputs=["done"], execution="inline")
def broken_teardown(ctx: NodeContext) -> None:
    raise OSError("disk gone")


CHILD = (
    FlowBuilder("urn:test:flow:events-child")
    .task("step", child_step, {"done": "end"})
    .terminal("end")
    .build()
)


def everything() -> Flow:
    """A split: one branch parks (signalled later; a reminder timer leaves a token that lingers
    until the run's deadline), the other waits, scatters and runs a subflow; they join, and a
    node times out; a retry first, phases around it all."""
    return (
        FlowBuilder("urn:test:flow:events")
        .phase("setup", "pre", setup)
        .task(
            "start",
            flaky,
            {"next": ["approve", "pause"]},
            retry={"backoff": "fixed", "initial": "PT10S", "max_attempts": 2},
        )
        .task(
            "approve",
            approve,
            {"approved": "gather", "remind": "remind"},
            timers=[{"after": "PT10M", "output": "remind", "interrupting": False}],
        )
        .task("remind", remind, {"sent": "linger"})
        .wait("linger", "P1D", then="lingered")
        .wait("pause", "PT5M", then="spread")
        .scatter(
            "spread",
            "numbers",
            double,
            {"all-success": "child", "partial": "child", "all-error": "child", "empty": "child"},
            gather={"strategy": "append", "field": "doubled"},
        )
        .subflow("child", CHILD, {"success": "gather", "error": "gather"})
        .join("gather", "all", {"success": "slow", "error": "slow"})
        .task("slow", slow, {"done": "end", "timeout": "end"}, timeout="PT1M")
        .phase("teardown", "post", broken_teardown)
        .terminal("end")
        .terminal("lingered")
        .deadline("PT1H")
        .entrypoint("main", "start")
        .build()
    )


def typed(history: Sequence[EventRecord]) -> list[EventPayload]:
    """Each record's payload, checked: it parses, and its data is exactly what the payload
    writes (no field missing, no key of another shape)."""
    out = []
    for e in history:
        payload = payload_of(e)
        assert payload.KIND.value == e.kind
        assert data_of(payload) == e.data, e.kind
        out.append(payload)
    return out


async def test_a_run_through_most_kinds_has_a_typed_history() -> None:
    hooked: list[tuple[str, EventPayload]] = []

    def hook(e: EventRecord) -> None:
        hooked.append((e.run_id, payload_of(e)))

    def failing(e: EventRecord) -> None:
        if e.kind == "wait_started":
            raise RuntimeError("hook broke")

    async with running(autojump=False, flows=[CHILD], hooks=[hook, failing]) as (engine, clock):
        handle = await engine.start(everything(), {"numbers": [1, 2]})
        await clock.advance(timedelta(minutes=15))  # the retry, the wait, the timer
        await engine.signal(handle.run_id, placement="approve", output="approved")
        await clock.advance(timedelta(hours=1))  # the timeout, then the run's deadline
        result = await handle.result()
        history = await engine.history(handle.run_id)
        (started,) = of_kind(history, "subflow_started")
        child = await engine.history(payload_of(started, SubflowStarted).child)

    assert result.lifecycle is Lifecycle.TIMED_OUT
    payloads = typed(history)
    typed(child)
    assert {p.KIND for p in payloads} == set(EventKind) - {EventKind.PROCESS_STARTED}
    assert [p for r, p in hooked if r == result.run_id] == [
        p for p in payloads if p.KIND is not EventKind.HOOK_FAILED
    ]

    def only(cls: type[Any], **match: Any) -> list[Any]:
        return [
            p
            for p in payloads
            if isinstance(p, cls) and all(getattr(p, k) == v for k, v in match.items())
        ]

    assert only(RunStarted) == [
        RunStarted(flow="urn:test:flow:events", version="1", deadline=at(3600).isoformat())
    ]
    # One schema whatever the placement: what differs is only which optional fields are set.
    optional = {"node", "phase", "subflow"}
    shapes = {frozenset(e.data) - optional for e in of_kind(history, "node_started")}
    assert shapes == {frozenset({"visit", "kind", "deadline"})}
    assert [(p.kind, p.node, p.phase, p.subflow) for p in only(NodeStarted)] == [
        ("phase", setup.id, "pre", None),
        ("task", flaky.id, None, None),
        ("task", flaky.id, None, None),
        ("task", approve.id, None, None),
        ("scatter", double.id, None, None),
        ("subflow", None, None, CHILD.id),
        ("task", remind.id, None, None),
        ("task", slow.id, None, None),
        ("phase", broken_teardown.id, "post", None),
    ]
    assert [
        (p.error["type"], p.error["message"], p.error["details"]) for p in only(NodeFailed)
    ] == [
        ("ConnectionError", "try again", {}),
        ("OSError", "disk gone", {}),  # the post phase
    ]
    assert all((p.error["traceback"] or "").startswith("Traceback") for p in only(NodeFailed))
    assert only(NodeRetried) == [
        NodeRetried(due=at(10).isoformat(), next_attempt=2, delay=10.0, error="ConnectionError")
    ]
    assert [(p.purpose, p.output, p.to) for p in only(TimerFired)] == [
        ("retry", None, None),
        ("wait", "elapsed", ["spread"]),
        ("timer", "remind", ["remind"]),
    ]
    (timer,) = only(TimerFired, purpose="timer")
    assert (timer.index, timer.anchor, timer.interrupting) == (0, "park", False)
    (parked,) = only(Parked)
    assert only(Signalled) == [
        Signalled(output="approved", idempotency_key=None, keys=[], park=parked.park, to=["gather"])
    ]
    assert [(p.index, p.status) for p in only(ScatterItemFinished)] == [(0, "done"), (1, "done")]
    (scattered,) = only(NodeFinished, items=2)
    assert (scattered.succeeded, scattered.failed, scattered.to) == (2, 0, ["child"])
    assert only(SubflowFinished)[0].to == ["gather"]
    assert len(only(JoinArrived)) == 2
    # The scatter's branch (1) arrives before the signalled one (0).
    assert [(p.output, p.arrived, p.branches) for p in only(JoinFired)] == [("success", 2, [1, 0])]
    (late,) = only(NodeTimedOut)
    assert (late.budget, late.routed, late.to) == (60.0, True, ["end"])
    assert only(TerminalReached) == [TerminalReached(outcome="completed")]
    assert only(TokenCancelled) == [TokenCancelled(reason="run_ended")]
    assert [w.message for w in only(RunWarning)] == list(result.warnings)
    assert [h.event for h in only(HookFailed)] == ["wait_started", "wait_started"]
    assert only(RunFinished)[0].lifecycle == "timed_out"
    assert kinds(history)[-1] == "run_finished"


def test_process_started_round_trips() -> None:
    # (A process-isolated node is the one kind the run above leaves out.)
    assert payload_of(record(ProcessStarted(pid=7))) == ProcessStarted(pid=7)
