"""A parked run ended (or moved on) by a signal or by a park deadline.

Each scenario parks a run (id ``r``), then signals it or lets its park deadline pass, and
checks the run's result, the answers and refusals the signals got, and what the store holds
afterwards: the history, the state, the tokens, the parks, the due entries and node anchors
left (none once the run has ended), the idempotency keys answered. A hook that records every
event changes none of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, RunResult, SignalRefused
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, MemoryStore
from tests.engine.engine_helpers import at, running


@node(outputs=["ok", "again", "bad", "nudge"], timeout="PT10M", register=False)
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        ctx.state["woken"] = dict(ctx.signal)
        return "ok"
    ctx.state.setdefault("asked", 0)
    ctx.state["asked"] += 1
    return Park(key=f"k-{ctx.run_id}-{ctx.placement}", payload={"ask": ctx.placement})


@node(outputs=["back"], execution="inline", register=False)
def bounce(ctx: NodeContext) -> str:
    return "back"


@node(outputs=["left", "right"], execution="inline", register=False)
def fork(ctx: NodeContext) -> str:
    return "left"


@node(outputs=["done"], execution="inline", register=False)
def tidy(ctx: NodeContext) -> str:
    ctx.state["tidied"] = True
    return "done"


def flow(
    *,
    route_timeout: bool = True,
    post: bool = False,
    **settings: Any,
) -> Flow:
    """``p`` parks (a 10 min window); ``ok`` ends the run at ``done``, ``again`` loops back to
    ``p`` through ``b``, ``bad`` ends it at a failed terminal, ``nudge`` at ``nudged``."""
    routes: dict[str, Any] = {"ok": "done", "again": "b", "bad": "broken", "nudge": "nudged"}
    if route_timeout:
        routes["timeout"] = "late"
    builder = (
        FlowBuilder("urn:test:flow:signals" + ("" if route_timeout else "-unrouted"))
        .task("p", ask, routes, **settings)
        .task("b", bounce, {"back": "p"})
        .terminal("done", "done")
        .terminal("broken", "failed")
        .terminal("nudged", "nudged")
        .reducer("notes", "append")
        .reducer("count", "sum")
    )
    if route_timeout:
        builder.terminal("late", "late")
    if post:
        builder.phase("tidy", "post", tidy)
    return builder.build()


def two_parks() -> Flow:
    return (
        FlowBuilder("urn:test:flow:signals-two")
        .task("f", fork, {"left": ["p", "q"]})
        .task("p", ask, {"ok": "done", "timeout": "late"})
        .task("q", ask, {"ok": "done2", "timeout": "late"})
        .terminal("done", "done")
        .terminal("done2", "done2")
        .terminal("late", "late")
        .build()
    )


Act = Callable[[Engine, VirtualClock], Awaitable[list[Any]]]


ANSWER_KEYS = ("cb-1", "cb-2")
"""The idempotency keys the scenarios use."""


async def dump(engine: Engine, run_id: str) -> dict[str, Any]:
    """What the store holds of the run."""
    store = engine.store
    assert isinstance(store, MemoryStore)
    return {
        "run": dataclasses.asdict(await store.get_run(run_id)),
        "state": await store.get_state(run_id),
        "tokens": [dataclasses.asdict(t) for t in await store.tokens(run_id)],
        "history": [dataclasses.asdict(e) for e in await store.history(run_id)],
        "parks": [dataclasses.asdict(p) for p in await store.parks(run_id=run_id)],
        "due": store.due_entries(),
        "anchors": list(await store.node_anchors(run_id)),
        "answered": [k for k in ANSWER_KEYS if await store.signal_answer(k) is not None],
    }


def plain(value: Any) -> Any:
    """Receipts and refusals as comparable values."""
    if isinstance(value, SignalRefused):
        return ("refused", value.reason, str(value), value.at)
    return value


async def play(
    f: Flow,
    act: Act,
    *,
    hooked: bool = False,
    deadline: str | None = None,
    input: Any = None,
) -> tuple[RunResult, dict[str, Any], list[Any]]:
    """Park run ``r`` of ``f``, then ``act`` on it; once two more hours have passed: its
    result, what the store holds of it, and what ``act``'s signals got."""
    hooks = [lambda e: None] if hooked else []
    async with running(autojump=False, hooks=hooks) as (engine, clock):
        first = await engine.run(f, input or {}, run_id="r", deadline=deadline)
        assert first.lifecycle is Lifecycle.PARKED
        answers = [plain(a) for a in await act(engine, clock)]
        await clock.advance(timedelta(hours=2))  # whatever is left runs out
        result = await engine.wait("r")
        stored = await dump(engine, "r")
    return result, stored, answers


def stored_kinds(stored: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in stored["history"]]


async def signal(engine: Engine, **options: Any) -> Any:
    try:
        return await engine.signal("r", **options)
    except SignalRefused as exc:
        return exc


# -- the scenarios -------------------------------------------------------------------------------


async def ok_after_a_minute(engine: Engine, clock: VirtualClock) -> list[Any]:
    await clock.advance(timedelta(minutes=1))
    return [await signal(engine, placement="p", output="ok")]


async def ok_with_a_payload(engine: Engine, clock: VirtualClock) -> list[Any]:
    payload = {"notes": "paid", "count": 2, "extra": {"a": 1}}
    return [await signal(engine, key="k-r-p", output="ok", payload=payload)]


async def payload_only(engine: Engine, clock: VirtualClock) -> list[Any]:
    return [await signal(engine, placement="p", payload={"go": 1})]


async def ok_after_the_park_deadline(engine: Engine, clock: VirtualClock) -> list[Any]:
    await clock.advance(timedelta(minutes=11))
    return [await signal(engine, placement="p", output="ok")]


async def one_key_twice_then_another(engine: Engine, clock: VirtualClock) -> list[Any]:
    first = await signal(engine, placement="p", output="ok", idempotency_key="cb-1")
    await clock.advance(timedelta(seconds=5))
    again = await signal(engine, placement="p", output="ok", idempotency_key="cb-1")
    other = await signal(engine, placement="p", output="ok", idempotency_key="cb-2")
    return [first, again, other]


async def q_then_p(engine: Engine, clock: VirtualClock) -> list[Any]:
    first = await signal(engine, placement="q", output="ok")
    await engine.wait_parked("r")
    await clock.advance(timedelta(minutes=1))
    return [first, await signal(engine, placement="p", output="ok")]


async def again_then_ok(engine: Engine, clock: VirtualClock) -> list[Any]:
    await clock.advance(timedelta(minutes=1))
    again = await signal(engine, placement="p", output="again")
    await engine.wait_parked("r")
    await clock.advance(timedelta(minutes=1))
    return [again, await signal(engine, placement="p", output="ok")]


async def ok_after_two_minutes(engine: Engine, clock: VirtualClock) -> list[Any]:
    await clock.advance(timedelta(minutes=2))
    return [await signal(engine, placement="p", output="ok")]


async def ok_then_refused(engine: Engine, clock: VirtualClock) -> list[Any]:
    ok = await signal(engine, placement="p", output="ok")
    await clock.advance(timedelta(seconds=3))
    return [
        ok,
        await signal(engine, placement="p", output="ok"),
        await signal(engine, key="k-r-p", payload={"x": 1}),
        await signal(engine, placement="nowhere", output="ok"),
    ]


async def ok_after_the_run_deadline(engine: Engine, clock: VirtualClock) -> list[Any]:
    await engine.sweeper.close()  # the run deadline's due entry is not fired yet
    await clock.advance(timedelta(minutes=6))
    return [await signal(engine, placement="p", output="ok")]


TIMERS = [
    {"after": "PT1M", "output": "nudge", "interrupting": False},
    {"after": "PT5M", "output": "nudge", "interrupting": False},
]
RETRY = {"max_attempts": 2, "backoff": "fixed", "initial": "PT1M", "retry_on": ["TimeoutError"]}

SCENARIOS: dict[str, tuple[Callable[[], Flow], Act, dict[str, Any]]] = {
    "output to a terminal": (flow, ok_after_a_minute, {"deadline": "PT1H"}),
    "payload through reducers": (
        flow,
        ok_with_a_payload,
        {"input": {"notes": ["asked"], "count": 1}},
    ),
    "no output": (flow, payload_only, {}),
    "routed park deadline": (flow, ok_after_the_park_deadline, {"deadline": "PT1H"}),
    "unrouted park deadline": (
        lambda: flow(route_timeout=False),
        ok_after_the_park_deadline,
        {},
    ),
    "idempotency key": (flow, one_key_twice_then_another, {}),
    "two parked tokens": (two_parks, q_then_p, {}),
    "node anchor": (lambda: flow(timeout_anchor="node"), again_then_ok, {}),
    "timers": (lambda: flow(timers=TIMERS), ok_after_two_minutes, {}),
    "refusals": (flow, ok_then_refused, {}),
    "retried timeout": (lambda: flow(retry=RETRY), ok_after_the_park_deadline, {}),
    "past run deadline": (flow, ok_after_the_run_deadline, {"deadline": "PT5M"}),
    "post phase": (lambda: flow(post=True), ok_after_a_minute, {}),
}


async def scenario(name: str, *, hooked: bool = False) -> tuple[Any, dict[str, Any], list[Any]]:
    make, act, options = SCENARIOS[name]
    return await play(make(), act, hooked=hooked, **options)


async def test_a_signal_with_an_output_to_a_terminal_ends_the_run() -> None:
    result, stored, answers = await scenario("output to a terminal")
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "done"
    assert stored_kinds(stored)[-3:] == ["signalled", "terminal_reached", "run_finished"]
    assert stored["due"] == []  # the park deadline and the run deadline are gone
    assert stored["parks"][0]["status"] == "signalled"
    assert answers[0].park == "r.1#1" and not answers[0].duplicate
    assert (answers[0].placement, answers[0].output, answers[0].at) == ("p", "ok", at(60))


async def test_a_signal_with_a_payload_goes_through_the_reducers() -> None:
    result, stored, _ = await scenario("payload through reducers")
    assert stored["state"]["notes"] == ["asked", "paid"] and stored["state"]["count"] == 3
    assert stored["state"]["extra"] == {"a": 1}
    assert result.state == stored["state"]


async def test_a_signal_without_output_reruns_the_node() -> None:
    result, stored, _ = await scenario("no output")
    assert result.outcome == "done" and stored["state"]["woken"] == {"go": 1}
    assert stored["state"]["asked"] == 1  # the node ran again, woken by the signal
    assert stored_kinds(stored).count("node_started") == 2


async def test_a_park_deadline_routed_to_a_terminal_ends_the_run() -> None:
    result, stored, answers = await scenario("routed park deadline")
    assert result.outcome == "late"
    assert stored_kinds(stored)[-3:] == ["node_timed_out", "terminal_reached", "run_finished"]
    assert [e["at"] for e in stored["history"] if e["kind"] == "node_timed_out"] == [at(600)]
    assert answers[0][1] == "expired" and answers[0][3] == at(600)
    assert stored["due"] == []


async def test_an_unrouted_park_deadline_fails_the_run() -> None:
    result, stored, answers = await scenario("unrouted park deadline")
    assert result.lifecycle is Lifecycle.FAILED and result.outcome is None
    assert result.errors[0].type == "NodeTimeoutError"
    assert result.interrupted_at is not None and result.interrupted_at.node == "p"
    assert result.interrupted_at.at == at(600)
    assert stored["tokens"][0]["status"] == "failed"
    assert answers[0][1] == "expired"
    assert stored["due"] == []


async def test_a_repeated_idempotency_key_gets_the_first_answer() -> None:
    _, stored, answers = await scenario("idempotency key")
    assert answers[1] == dataclasses.replace(answers[0], duplicate=True)
    assert answers[2][1] == "moved_on"  # a new key is judged again: refused
    assert stored_kinds(stored).count("signalled") == 1
    assert stored["answered"] == ["cb-1"]  # only the signal that applied left its answer


async def test_two_parked_tokens_the_run_ends_at_the_last_signal() -> None:
    result, stored, answers = await scenario("two parked tokens")
    assert result.terminals == ("done2", "done") and result.outcome == "done2"
    assert result.lifecycle is Lifecycle.COMPLETED
    assert [a.placement for a in answers] == ["q", "p"]
    assert stored["due"] == []


async def test_a_node_anchor_is_released_and_visits_go_on() -> None:
    result, stored, _ = await scenario("node anchor")
    assert stored["anchors"] == []
    assert stored["tokens"][0]["visit"] == 1 and stored["tokens"][0]["placement"] == "done"
    assert stored["state"]["asked"] == 2
    assert result.outcome == "done"


async def test_armed_timers_are_dropped_and_a_fired_one_counts() -> None:
    # The first timer fired at 1 min (a side token ended at nudged); the signal at 2 min ends
    # the run, and the second timer with it.
    result, stored, _ = await scenario("timers")
    assert stored["due"] == []
    assert (
        result.terminals == ("nudged", "done") and result.outcome == "done"
    )  # (the timer's branch sets none)
    assert stored_kinds(stored).count("timer_fired") == 1


async def test_refusals_after_a_run_ended_by_a_signal() -> None:
    _, _, answers = await scenario("refusals")
    assert not isinstance(answers[0], tuple)
    assert [a[1] for a in answers[1:]] == ["moved_on", "moved_on", "unknown"]


async def test_a_retried_park_deadline_runs_the_node_again() -> None:
    # The park timed out at 10 min; its retry parked again at 11 min, where the signal finds it.
    result, stored, answers = await scenario("retried timeout")
    assert stored_kinds(stored).count("node_retried") == 1
    assert stored["state"]["asked"] == 2
    assert (answers[0].output, answers[0].at) == ("ok", at(660))
    assert result.outcome == "done"


async def test_a_passed_run_deadline_wins_over_a_signal_that_comes_before_it_is_fired() -> None:
    # The sweeper has not fired the run deadline yet when the signal comes: the signal finds
    # the run's time over (as a park's deadline wins over a late signal) and is refused.
    result, _, answers = await scenario("past run deadline")
    (refused,) = answers
    assert refused[0] == "refused" and "run_deadline" in refused[2]
    assert result.lifecycle is Lifecycle.TIMED_OUT, result
    assert result.interrupted_at is not None and result.interrupted_at.at == at(5 * 60)


@pytest.mark.parametrize(
    ("output", "refused", "lifecycle", "outcome"),
    [
        ("again", None, Lifecycle.COMPLETED, "done"),
        ("bad", None, Lifecycle.FAILED, "failed"),
        ("timeout", "invalid_output", Lifecycle.COMPLETED, "late"),
        ("nope", "invalid_output", Lifecycle.COMPLETED, "late"),
    ],
    ids=["to a task", "to a failed terminal", "engine output", "undeclared output"],
)
async def test_where_a_signals_output_leads(
    output: str, refused: str | None, lifecycle: Lifecycle, outcome: str
) -> None:
    # An output the node does not declare, or one only the engine takes, is refused and
    # changes nothing: the park deadline then ends the run.
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        got = await signal(engine, placement="p", output=output)
        if output == "again":
            await engine.wait_parked("r")
            await engine.signal("r", placement="p", payload={})
        return [got]

    result, stored, answers = await play(flow(), act)
    assert (answers[0][1] if isinstance(answers[0], tuple) else None) == refused
    assert (result.lifecycle, result.outcome) == (lifecycle, outcome)
    assert stored["due"] == []


async def test_a_post_phase_runs_after_a_run_ended_by_a_signal() -> None:
    result, stored, _ = await scenario("post phase")
    assert result.outcome == "done"
    assert stored["state"]["tidied"] is True


async def test_history_written_after_the_park_is_kept_when_a_signal_ends_the_run() -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        note = EventRecord("warning", "r", clock.now(), data={"message": "noted"})
        await engine.store.commit(Commit("r", events=[note]))
        return [await signal(engine, placement="p", output="ok")]

    result, stored, _ = await play(flow(), act)
    assert result.outcome == "done"
    kinds = stored_kinds(stored)
    assert kinds[-4:] == ["warning", "signalled", "terminal_reached", "run_finished"]
    assert [e["seq"] for e in stored["history"]] == list(range(1, len(kinds) + 1))


async def test_wait_answers_a_run_that_ended_from_the_store() -> None:
    # Runs ended by a signal, by a routed and by an unrouted park deadline: wait answers each
    # with its result, here and from another engine on the same store (which reads the result
    # stored with the run).
    async with running(autojump=False) as (engine, clock):
        await engine.run(flow(), run_id="signalled")
        await engine.run(flow(), run_id="late")
        await engine.run(flow(route_timeout=False), run_id="failed")
        await engine.signal("signalled", placement="p", output="ok")
        await clock.advance(timedelta(minutes=10))
        results = {run_id: await engine.wait(run_id) for run_id in ("signalled", "late", "failed")}
        other = Engine(store=engine.store, clock=engine.clock, flows=[flow()])
        try:
            for run_id, result in results.items():
                assert await other.wait(run_id) == result
                assert await engine.wait(run_id) == result
        finally:
            await other.close()
    assert {r: (v.lifecycle, v.outcome) for r, v in results.items()} == {
        "signalled": (Lifecycle.COMPLETED, "done"),
        "late": (Lifecycle.COMPLETED, "late"),
        "failed": (Lifecycle.FAILED, None),
    }
    for result in results.values():
        assert RunResult.from_dict(result.to_dict()) == result


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_a_hook_changes_nothing(name: str) -> None:
    assert await scenario(name, hooked=True) == await scenario(name)
