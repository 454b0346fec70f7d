"""Ending a let-go run in one commit (``flowtide.engine.letgo``) against the general path.

A signal whose output takes the only live token of a let-go run to a terminal, or a park
deadline whose ``timeout`` output does (or that fails the run), ends the run in one commit
without rebuilding its executor, unless a hook is registered. Each scenario runs twice, without
and with a hook that does nothing, on engines of their own with the same run id; both give the
same history (kinds, order, instants, data), result, refusals and store contents. A spy on the
rebuild tells which path a scenario took.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park, SignalRefused
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, MemoryStore
from tests.engine.engine_helpers import T0, at, kinds, of_kind, running


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
    routes: dict[str, Any] = {"ok": "done", "again": "b", "bad": "broken", "nudge": "nudged"}
    if route_timeout:
        routes["timeout"] = "late"
    builder = (
        FlowBuilder("urn:test:flow:letgo")
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
        FlowBuilder("urn:test:flow:letgo-two")
        .task("f", fork, {"left": ["p", "q"]})
        .task("p", ask, {"ok": "done", "timeout": "late"})
        .task("q", ask, {"ok": "done2", "timeout": "late"})
        .terminal("done", "done")
        .terminal("done2", "done2")
        .terminal("late", "late")
        .build()
    )


Act = Callable[[Engine, VirtualClock], Awaitable[list[Any]]]


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The run ids the engine rebuilt an executor for (the general path)."""
    seen: list[str] = []
    load = Engine._load

    async def spy(self: Engine, run_id: str, rearm: bool) -> Any:
        seen.append(run_id)
        return await load(self, run_id, rearm)

    monkeypatch.setattr(Engine, "_load", spy)
    yield seen


async def dump(engine: Engine, run_id: str) -> dict[str, Any]:
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
        "answers": dict(store._answers),
    }


def plain(value: Any) -> Any:
    """Receipts and refusals as comparable values."""
    if isinstance(value, SignalRefused):
        return ("refused", value.reason, str(value), value.at)
    return value


async def play(
    f: Flow, act: Act, *, hooked: bool, deadline: str | None = None, input: Any = None
) -> tuple[Any, dict[str, Any], list[Any]]:
    hooks = [lambda e: None] if hooked else []
    async with running(autojump=False, hooks=hooks) as (engine, clock):
        first = await engine.run(f, input or {}, run_id="r", deadline=deadline)
        assert first.lifecycle is Lifecycle.PARKED and not engine._runs
        answers = [plain(a) for a in await act(engine, clock)]
        await clock.advance(timedelta(hours=2))  # whatever is left runs out
        result = await engine.wait("r")
        stored = await dump(engine, "r")
    return result, stored, answers


async def compare(
    f: Flow, act: Act, rebuilds: list[str], **options: Any
) -> tuple[Any, dict[str, Any], list[Any], int]:
    """Both paths give the same; returns what the fast one gave and how often it rebuilt."""
    fast = await play(f, act, hooked=False, **options)
    fast_rebuilds = len(rebuilds)
    rebuilds.clear()
    general = await play(f, act, hooked=True, **options)
    assert rebuilds, "the hooked run must take the general path"
    assert fast[0] == general[0]
    assert fast[1] == general[1]
    assert fast[2] == general[2]
    return (*fast, fast_rebuilds)


def stored_kinds(stored: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in stored["history"]]


async def signal(engine: Engine, **options: Any) -> Any:
    try:
        return await engine.signal("r", **options)
    except SignalRefused as exc:
        return exc


async def test_a_signal_with_an_output_to_a_terminal(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=1))
        return [await signal(engine, placement="p", output="ok")]

    result, stored, answers, loads = await compare(flow(), act, rebuilds, deadline="PT1H")
    assert loads == 0
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "done"
    assert stored_kinds(stored)[-3:] == ["signalled", "terminal_reached", "run_finished"]
    assert stored["due"] == []  # the park deadline and the run deadline are gone
    assert stored["parks"][0]["status"] == "signalled"
    assert answers[0].park == "r.1#1" and not answers[0].duplicate


async def test_a_signal_with_a_payload_goes_through_the_reducers(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        return [
            await signal(
                engine,
                key="k-r-p",
                output="ok",
                payload={"notes": "paid", "count": 2, "extra": {"a": 1}},
            )
        ]

    result, stored, _, loads = await compare(
        flow(), act, rebuilds, input={"notes": ["asked"], "count": 1}
    )
    assert loads == 0
    assert stored["state"]["notes"] == ["asked", "paid"] and stored["state"]["count"] == 3
    assert result.state == stored["state"]


async def test_a_signal_without_output_reruns_the_node_on_the_general_path(
    rebuilds: list[str],
) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        return [await signal(engine, placement="p", payload={"go": 1})]

    result, stored, _, loads = await compare(flow(), act, rebuilds)
    assert loads == 1
    assert result.outcome == "done" and stored["state"]["woken"] == {"go": 1}


async def test_a_park_deadline_routed_to_a_terminal(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=11))
        return [await signal(engine, placement="p", output="ok")]  # expired

    result, stored, answers, loads = await compare(flow(), act, rebuilds, deadline="PT1H")
    assert loads == 0
    assert result.outcome == "late"
    assert stored_kinds(stored)[-3:] == ["node_timed_out", "terminal_reached", "run_finished"]
    assert [e["at"] for e in stored["history"] if e["kind"] == "node_timed_out"] == [at(600)]
    assert answers[0][1] == "expired" and answers[0][3] == at(600)
    assert stored["due"] == []


async def test_an_unrouted_park_deadline_fails_the_run(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=11))
        return [await signal(engine, placement="p", output="ok")]

    result, stored, answers, loads = await compare(flow(route_timeout=False), act, rebuilds)
    assert loads == 0
    assert result.lifecycle is Lifecycle.FAILED and result.outcome is None
    assert result.errors[0].type == "NodeTimeoutError"
    assert result.interrupted_at is not None and result.interrupted_at.node == "p"
    assert stored["tokens"][0]["status"] == "failed"
    assert answers[0][1] == "expired"


async def test_a_repeated_idempotency_key_gets_the_first_answer(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        first = await signal(engine, placement="p", output="ok", idempotency_key="cb-1")
        await clock.advance(timedelta(seconds=5))
        again = await signal(engine, placement="p", output="ok", idempotency_key="cb-1")
        other = await signal(engine, placement="p", output="ok", idempotency_key="cb-2")
        return [first, again, other]

    _, stored, answers, loads = await compare(flow(), act, rebuilds)
    assert loads == 0
    assert answers[1] == dataclasses.replace(answers[0], duplicate=True)
    assert answers[2][1] == "moved_on"  # a new key is judged again: refused
    assert list(stored["answers"]) == ["cb-1"]


async def test_two_parked_tokens_take_the_general_path_then_the_last_one_the_fast_path(
    rebuilds: list[str],
) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        first = await signal(engine, placement="q", output="ok")
        await engine.wait_parked("r")
        await clock.advance(timedelta(minutes=1))
        return [first, await signal(engine, placement="p", output="ok")]

    result, _, _, loads = await compare(two_parks(), act, rebuilds)
    assert loads == 1  # the first signal only
    assert result.terminals == ("done2", "done") and result.outcome == "done2"


async def test_a_node_anchor_is_released_and_visits_go_on(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=1))
        again = await signal(engine, placement="p", output="again")
        await engine.wait_parked("r")
        await clock.advance(timedelta(minutes=1))
        return [again, await signal(engine, placement="p", output="ok")]

    result, stored, _, loads = await compare(flow(timeout_anchor="node"), act, rebuilds)
    assert loads == 1  # the loop back
    assert stored["anchors"] == []
    assert stored["tokens"][0]["visit"] == 1 and stored["tokens"][0]["placement"] == "done"
    assert result.outcome == "done"


async def test_armed_timers_are_dropped_and_a_fired_one_counts(rebuilds: list[str]) -> None:
    timers = [
        {"after": "PT1M", "output": "nudge", "interrupting": False},
        {"after": "PT5M", "output": "nudge", "interrupting": False},
    ]

    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=2))  # the first timer fired: a side token ended
        return [await signal(engine, placement="p", output="ok")]

    result, stored, _, loads = await compare(flow(timers=timers), act, rebuilds)
    assert loads == 1  # the timer's firing
    assert stored["due"] == []
    assert result.terminals == ("nudged", "done") and result.outcome == "nudged"


async def test_refusals_after_the_fast_path(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        ok = await signal(engine, placement="p", output="ok")
        await clock.advance(timedelta(seconds=3))
        return [
            ok,
            await signal(engine, placement="p", output="ok"),
            await signal(engine, key="k-r-p", payload={"x": 1}),
            await signal(engine, placement="nowhere", output="ok"),
        ]

    _, _, answers, loads = await compare(flow(), act, rebuilds)
    assert loads == 0
    assert [a[1] for a in answers[1:]] == ["moved_on", "moved_on", "unknown"]


@pytest.mark.parametrize(
    ("case", "output"),
    [
        ("to a task", "again"),
        ("to a failed terminal", "bad"),
        ("invalid output", "timeout"),
        ("undeclared output", "nope"),
        ("post phase", "ok"),
        ("history after the checkpoint", "ok"),
    ],
)
async def test_what_the_fast_path_hands_to_the_general_path(
    case: str, output: str, rebuilds: list[str]
) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        if case == "history after the checkpoint":
            note = EventRecord("warning", "r", clock.now(), data={"message": "noted"})
            await engine.store.commit(Commit("r", events=[note]))
        got = await signal(engine, placement="p", output=output)
        if output == "again":
            await engine.wait_parked("r")
            await engine.signal("r", placement="p", payload={})
        return [got]

    f = flow(post=case == "post phase")
    _, stored, answers, loads = await compare(f, act, rebuilds)
    refused = isinstance(answers[0], tuple)
    assert refused == (case in ("invalid output", "undeclared output"))
    assert loads >= 1
    if case == "post phase":
        assert stored["state"]["tidied"] is True


async def test_a_retried_timeout_takes_the_general_path(rebuilds: list[str]) -> None:
    retry = {"max_attempts": 2, "backoff": "fixed", "initial": "PT1M", "retry_on": ["TimeoutError"]}

    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await clock.advance(timedelta(minutes=11))
        return [await signal(engine, placement="p", output="ok")]

    _, stored, _, loads = await compare(flow(retry=retry), act, rebuilds)
    assert loads >= 1
    assert stored_kinds(stored).count("node_retried") == 1


async def test_wait_answers_a_run_that_ended_here_from_memory() -> None:
    async with running() as (engine, _clock):
        first = await engine.run(flow(), run_id="r")
        await engine.signal("r", placement="p", output="ok")
        reads: list[str] = []
        get_run = engine.store.get_run

        async def spy(run_id: str) -> Any:
            reads.append(run_id)
            return await get_run(run_id)

        engine.store.get_run = spy  # type: ignore[method-assign]
        result = await engine.wait(first.run_id)
        assert reads == [] and result.outcome == "done"
        # A run that ended elsewhere is read from the store.
        other = Engine(store=engine.store, clock=engine.clock, flows=[flow()])
        try:
            again = await other.wait("r")
        finally:
            await other.close()
        assert reads == ["r"] and again == result


@node(outputs=["approved"], timeout="PT10S", register=False)
async def wait_for_ok(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


class YieldingStore(MemoryStore):
    """A memory store that lets other tasks run before each read and commit (as a database
    store would), so a signal's and a firing's reads and commits interleave."""

    async def get_run(self, run_id: str) -> Any:
        await asyncio.sleep(0)
        return await super().get_run(run_id)

    async def tokens(self, run_id: str, statuses: Any = None) -> Any:
        await asyncio.sleep(0)
        return await super().tokens(run_id, statuses)

    async def get_state(self, run_id: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return await super().get_state(run_id)

    async def commit(self, commit: Commit) -> Any:
        await asyncio.sleep(0)
        return await super().commit(commit)


RACE = (
    FlowBuilder("urn:test:flow:letgo-race")
    .task("w", wait_for_ok, {"approved": "yes", "timeout": "late"})
    .terminal("yes", "approved")
    .terminal("late", "late")
    .build()
)


async def interleaved_race(rng: random.Random, order: int, *, two_engines: bool) -> str:
    """A signal 1 µs before the deadline against the firing of the deadline, on a store that
    yields at each read and commit (the sweeper's firing run by hand, as in the sweeper's
    race tests)."""
    clock = VirtualClock(T0)
    store = YieldingStore()
    a = Engine(clock=clock, store=store, flows=[RACE])
    b = Engine(clock=clock, store=store, flows=[RACE]) if two_engines else a
    try:
        run_id = (await a.run(RACE)).run_id
        await a.sweeper.close()
        await clock.advance_to(at(10) - timedelta(microseconds=1))
        got: dict[str, Any] = {}

        async def send() -> None:
            for _ in range(rng.randrange(6)):
                await asyncio.sleep(0)
            try:
                got["signal"] = await b.signal(run_id, placement="w", output="approved")
            except SignalRefused as exc:
                got["refused"] = exc

        async def sweep() -> None:
            for _ in range(rng.randrange(6)):
                await asyncio.sleep(0)
            await a._fire_batch(await store.claim_due(at(10)))

        await asyncio.gather(*([send(), sweep()] if order else [sweep(), send()]))
        await clock.advance(timedelta(seconds=1))
        result = await a.wait(run_id)
        history = await a.history(run_id)
        assert len(of_kind(history, "signalled")) + len(of_kind(history, "node_timed_out")) == 1
        assert kinds(history).count("run_finished") == 1
        assert store.due_entries() == []
        if of_kind(history, "signalled"):
            assert result.outcome == "approved" and "signal" in got
            return "signal"
        assert result.outcome == "late" and got["refused"].reason == "expired"
        return "timeout"
    finally:
        await a.close()
        if b is not a:
            await b.close()


@pytest.mark.parametrize("two_engines", [False, True], ids=["one engine", "two engines"])
async def test_interleaved_signal_and_timeout_exactly_one_wins(two_engines: bool) -> None:
    rng = random.Random(5)
    winners = [await interleaved_race(rng, i % 2, two_engines=two_engines) for i in range(200)]
    assert set(winners) == {"signal", "timeout"}


async def test_a_run_past_its_deadline_takes_the_general_path(rebuilds: list[str]) -> None:
    async def act(engine: Engine, clock: VirtualClock) -> list[Any]:
        await engine.sweeper.close()  # the run deadline's due entry is not fired yet
        await clock.advance(timedelta(minutes=6))
        return [await signal(engine, placement="p", output="ok")]

    result, _, _, loads = await compare(flow(), act, rebuilds, deadline="PT5M")
    assert loads == 1
    assert result.lifecycle is Lifecycle.COMPLETED, result


async def test_nothing_rebuilds_a_run_while_the_fast_path_ends_it() -> None:
    # On a store that yields, a cancel arriving while the fast path is ending the run waits for
    # it (and finds the run ended), instead of rebuilding the run from what the store held
    # before the end was committed.
    clock = VirtualClock(T0)
    engine = Engine(clock=clock, store=YieldingStore(), flows=[RACE])
    try:
        run_id = (await engine.run(RACE)).run_id
        signal = asyncio.ensure_future(engine.signal(run_id, placement="w", output="approved"))
        for _ in range(50):  # until the fast path holds the run (it yields at each read)
            if run_id in engine._ending:
                break
            await asyncio.sleep(0)
        assert run_id in engine._ending
        cancelled = await engine.cancel(run_id)
        receipt = await signal
        assert receipt.output == "approved" and cancelled is False
        result = await engine.wait(run_id)
        assert result.lifecycle is Lifecycle.COMPLETED
        assert kinds(await engine.history(run_id)).count("run_finished") == 1
        assert (await engine.store.get_run(run_id)).lifecycle == "completed"
    finally:
        await engine.close()


async def test_the_engine_keeps_the_latest_ends_and_answers_older_ones_from_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flowtide.engine import engine as engine_module

    monkeypatch.setattr(engine_module, "ENDS_KEPT", 3)
    clock = VirtualClock(T0)
    engine = Engine(clock=clock, flows=[RACE])
    try:
        ids = [(await engine.run(RACE)).run_id for _ in range(5)]
        for run_id in ids:
            await engine.signal(run_id, placement="w", output="approved")
        assert engine._ends.run_ids() == ids[2:]  # the oldest went first
        for run_id in ids:
            result = await engine.wait(run_id)
            assert (result.run_id, result.outcome) == (run_id, "approved")
    finally:
        await engine.close()


async def test_the_terminal_of_a_signal_is_remembered_per_plan_for_valid_outputs_only(
    rebuilds: list[str],
) -> None:
    # Several runs of one plan: the first signal of each output decides, later ones read what
    # the plan remembered; an invalid output is refused every time and never remembered.
    f = flow()
    async with running() as (engine, _clock):
        for i in range(3):
            run_id = f"r{i}"
            await engine.run(f, run_id=run_id)
            await engine.signal(run_id, placement="p", output="again")  # to a task: general
            await engine.wait_parked(run_id)
            assert not engine._runs  # let go again
            await engine.signal(run_id, placement="p", output="ok")
            assert (await engine.wait(run_id)).outcome == "done"
            await engine.run(f, run_id=f"bad{i}")
            for bad in ("nope", "timeout", "nope"):
                with pytest.raises(SignalRefused) as refused:
                    await engine.signal(f"bad{i}", placement="p", output=bad)
                assert refused.value.reason == "invalid_output"
        plan = engine.plan(f.id)
        assert plan.signal_ends == {("p", "again"): None, ("p", "ok"): plan.placements["done"]}
    # Each run's "again" and each refused run's first refusal rebuilt it; no "ok" did.
    assert sorted(set(rebuilds)) == sorted(
        [f"r{i}" for i in range(3)] + [f"bad{i}" for i in range(3)]
    )


def test_the_end_result_and_the_receipt_are_the_ones_the_constructors_build() -> None:
    from flowtide.engine.engine import SignalReceipt, _receipt
    from flowtide.engine.result import ErrorInfo, InterruptedAt, RunResult
    from flowtide.engine.run import end_result

    errors = [ErrorInfo("NodeTimeoutError", "late", "p")]
    interrupted = InterruptedAt("timeout", "p", at(3), ("p",))
    for lifecycle, terminals, outcome in [
        (Lifecycle.COMPLETED, ["done"], "done"),
        (Lifecycle.FAILED, ["done"], None),
        (Lifecycle.FAILED, [], None),
    ]:
        built = end_result(
            "r", lifecycle, {"a": [1]}, terminals, outcome, errors=errors, interrupted=interrupted
        )
        expected = RunResult(
            run_id="r",
            lifecycle=lifecycle,
            outcome=built.outcome,
            state={"a": [1]},
            errors=tuple(errors),
            interrupted_at=interrupted,
            terminals=tuple(terminals),
        )
        assert built == expected and repr(built) == repr(expected)
        assert hash(built.terminals) == hash(expected.terminals)
        assert RunResult.from_dict(built.to_dict()) == expected
    assert end_result("r", Lifecycle.FAILED, {}, ["done"], None).outcome == "failed"
    receipt = _receipt("r", "r.1", "p", "ok", at(2), "r.1#1", "key")
    assert receipt == SignalReceipt("r", "r.1", "p", "ok", at(2), "r.1#1", "key")
    assert repr(receipt) == repr(SignalReceipt("r", "r.1", "p", "ok", at(2), "r.1#1", "key"))
    assert receipt.duplicate is False
    from flowtide.engine.letgo import _parked_at
    from flowtide.store import Expect, TokenStatus

    expect = _parked_at(3, at(2))
    assert expect == Expect(TokenStatus.PARKED, 3, at(2)) and hash(expect) == hash(
        Expect(TokenStatus.PARKED, 3, at(2))
    )
