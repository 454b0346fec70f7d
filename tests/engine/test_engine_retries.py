"""Retries: backoffs as due instants fired by the scheduler, exact instants, retry_on."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext
from flowtide.model import Flow
from flowtide.model.settings import RetryPolicy
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import at, of_kind, running

failures: dict[str, int] = {}
attempts_seen: list[int] = []


class Flaky(ConnectionError):
    pass


@node(outputs=["done"])
async def flaky(ctx: NodeContext) -> str:
    attempts_seen.append(ctx.attempt)
    left = failures.get(ctx.run_id, 0)
    if ctx.attempt <= ctx.state["fail_times"]:
        failures[ctx.run_id] = left + 1
        raise Flaky("try again")
    return "done"


def flow_with(retry: dict[str, Any]) -> Flow:
    return (
        FlowBuilder("urn:test:flow:retry")
        .task("call", flaky, {"done": "end"}, retry=retry)
        .terminal("end")
        .build()
    )


@pytest.mark.parametrize(
    ("retry", "starts"),
    [
        ({"backoff": "fixed", "initial": "PT10S", "max_attempts": 4}, [0, 10, 20, 30]),
        ({"backoff": "linear", "initial": "PT10S", "max_attempts": 4}, [0, 10, 30, 60]),
        (
            {"backoff": "exponential", "initial": "PT10S", "factor": 3, "max_attempts": 4},
            [0, 10, 40, 130],
        ),
        (
            {
                "backoff": "exponential",
                "initial": "PT10S",
                "factor": 10,
                "max": "PT50S",
                "max_attempts": 4,
            },
            [0, 10, 60, 110],
        ),
    ],
)
async def test_backoff_instants_are_exact(retry: dict[str, Any], starts: list[float]) -> None:
    attempts_seen.clear()
    async with running() as (engine, _clock):
        result = await engine.run(flow_with(retry), {"fail_times": 3})
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert attempts_seen == [1, 2, 3, 4]
    assert [e.at for e in of_kind(history, "node_started")] == [at(s) for s in starts]
    retried = of_kind(history, "node_retried")
    assert [e.data["due"] for e in retried] == [at(s).isoformat() for s in starts[1:]]
    assert [e.attempt for e in retried] == [1, 2, 3]
    assert [e.at for e in of_kind(history, "timer_fired")] == [at(s) for s in starts[1:]]
    assert [e.attempt for e in of_kind(history, "node_started")] == [1, 2, 3, 4]


async def test_decorrelated_jitter_uses_the_injected_random_source() -> None:
    retry = {
        "backoff": "decorrelated_jitter",
        "initial": "PT10S",
        "factor": 3,
        "max": "PT5M",
        "max_attempts": 4,
    }
    expected_delays = []
    rng = random.Random(7)
    prev = 10.0
    for _ in range(3):
        prev = min(300.0, rng.uniform(10.0, max(10.0, prev * 3)))
        expected_delays.append(prev)
    async with running(random=random.Random(7)) as (engine, _clock):
        result = await engine.run(flow_with(retry), {"fail_times": 3})
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    delays = [e.data["delay"] for e in of_kind(history, "node_retried")]
    assert delays == pytest.approx(expected_delays)
    assert all(10 <= d <= 300 for d in delays)


async def test_retries_exhausted_fail_the_run_with_the_last_error() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(
            flow_with({"backoff": "fixed", "initial": "PT1S", "max_attempts": 2}),
            {"fail_times": 5},
        )
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert [(e.type, e.message, e.placement) for e in result.errors] == [
        ("Flaky", "try again", "call")
    ]
    assert len(of_kind(history, "node_failed")) == 2
    assert len(of_kind(history, "node_retried")) == 1


async def test_retry_waits_are_due_instants_in_the_store() -> None:
    store = MemoryStore()
    async with running(autojump=False, store=store) as (engine, clock):
        handle = await engine.start(
            flow_with({"backoff": "fixed", "initial": "PT30S", "max_attempts": 2}),
            {"fail_times": 1},
        )
        await clock.advance(timedelta(seconds=1))
        (due,) = store.due_entries()
        assert (due.run_id, due.when) == (handle.run_id, at(30))
        await clock.advance(timedelta(seconds=29))
        result = await handle.result()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert store.due_entries() == []


class Unrelated(ValueError):
    pass


raised: list[str] = []


@node(outputs=["done"])
async def raises(ctx: NodeContext) -> str:
    kind = ctx.state["raise"]
    raised.append(kind)
    if ctx.attempt == 1:
        raise {"flaky": Flaky("x"), "value": Unrelated("y")}[kind]
    return "done"


@pytest.mark.parametrize(
    ("retry_on", "kind", "retried"),
    [
        (["ConnectionError"], "flaky", True),
        (["OSError"], "flaky", True),
        (["builtins.ConnectionError"], "flaky", True),
        (["ConnectionError"], "value", False),
        (["ValueError"], "value", True),
        (["tests.engine.test_engine_retries.Unrelated"], "value", True),
        ([], "value", True),
    ],
)
async def test_retry_on_filters_by_type_name(retry_on: list[str], kind: str, retried: bool) -> None:
    raised.clear()
    flow = (
        FlowBuilder("urn:test:flow:retry-on")
        .task(
            "r",
            raises,
            {"done": "end"},
            retry={"backoff": "fixed", "initial": "PT1S", "retry_on": retry_on},
        )
        .terminal("end")
        .build()
    )
    async with running() as (engine, _clock):
        result = await engine.run(flow, {"raise": kind})
    assert (result.lifecycle is Lifecycle.COMPLETED) is retried
    assert len(raised) == (2 if retried else 1)


def test_retry_policy_defaults_are_sane() -> None:
    from flowtide.engine.timing.retry import backoff_delay

    p = RetryPolicy()
    assert backoff_delay(p, 1) == timedelta(seconds=1)
    assert backoff_delay(p, 2) == timedelta(seconds=2)
    assert backoff_delay(p, 20) == timedelta(minutes=5)


@node(outputs=["done"])
async def slow_failure(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(seconds=8))
    raise Flaky("gateway down")


def window_during_backoff(anchor: str, routed: bool) -> Flow:
    b = FlowBuilder(f"urn:test:flow:window-backoff-{anchor}-{routed}")
    routes = {"done": "end", "timeout": "late"} if routed else {"done": "end"}
    b.task(
        "call",
        slow_failure,
        routes,
        timeout="PT10S",
        timeout_anchor=anchor,
        retry={"backoff": "fixed", "initial": "PT4S", "max_attempts": 5},
    )
    b.terminal("end")
    if routed:
        b.terminal("late", "late")
    return b.build()


@pytest.mark.parametrize("anchor", ["node", "instance"])
@pytest.mark.parametrize("routed", [True, False], ids=["routed", "unrouted"])
async def test_a_window_that_ends_during_a_backoff_fires_at_its_end(
    anchor: str, routed: bool
) -> None:
    # The first attempt fails at 8 s; the next would start at 12 s, but the window (10 s from
    # the first arrival, or from the run's start) is over at 10 s: it fires then, and the next
    # attempt never starts.
    async with running() as (engine, _clock):
        result = await engine.run(window_during_backoff(anchor, routed))
        history = await engine.history(result.run_id)
    timed = of_kind(history, "node_timed_out")
    assert [e.at for e in timed] == [at(10)]
    assert len(of_kind(history, "node_started")) == 1
    assert len(of_kind(history, "node_retried")) == 1
    if routed:
        assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "late"
    else:
        assert result.lifecycle is Lifecycle.FAILED
        assert result.errors[0].type == "NodeTimeoutError"
        assert result.interrupted_at is not None and result.interrupted_at.at == at(10)
    assert list(await engine.store.due_of(result.run_id)) == []  # the backoff's entry went


async def test_a_park_anchored_window_is_rearmed_after_the_backoff() -> None:
    # Each attempt gets ten fresh seconds: the 8 s attempts fail, none times out.
    async with running() as (engine, _clock):
        result = await engine.run(window_during_backoff("park", False))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED and result.errors[0].type == "Flaky"
    assert of_kind(history, "node_timed_out") == []
    assert len(of_kind(history, "node_started")) == 5
