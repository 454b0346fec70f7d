"""The park-at-once fast path of ``Engine.run`` (flowtide.engine.fastpark): the same result,
history and store contents as the general path, and every hand-over to an executor.

A hook (one that does nothing) disables the fast path, so running a flow with and without one
compares the two paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import (
    Engine,
    EngineError,
    Lifecycle,
    NodeContext,
    Output,
    Park,
    RunResult,
    fastpark,
)
from flowtide.engine.errors import Cancelled
from flowtide.engine.run import RunExecutor
from flowtide.model import Flow
from flowtide.store import EventRecord, MemoryStore
from tests.engine.engine_helpers import T0, at, kinds, running, two_engines

# -- nodes ------------


@node(outputs=["ok", "no"], register=False)
async def park_keyed(ctx: NodeContext) -> Any:
    ctx.state["asked"] = ctx.state.get("asked", 0) + 1
    return Park(key=f"k-{ctx.run_id}", payload={"url": "https://pay.example/1"})


@node(outputs=["ok"], register=False)
async def park_plain(ctx: NodeContext) -> Any:
    return Park()


@node(outputs=["ok", "parked"], execution="inline", register=False)
def park_by_name(ctx: NodeContext) -> Any:
    ctx.state["correlation_key"] = "by-name"
    del ctx.state["drop"]
    return Output("parked", update={"note": "waiting"})


@node(outputs=["ok"], register=False)
async def answer_now(ctx: NodeContext) -> Any:
    ctx.state["answered"] = True
    return "ok"


@node(outputs=["ok"], execution="inline", register=False)
def raise_now(ctx: NodeContext) -> Any:
    raise ValueError("no luck")


@node(outputs=["ok"], register=False)
async def stray_now(ctx: NodeContext) -> Any:
    return "sideways"


@node(outputs=["ok"], register=False)
async def sleep_then_park(ctx: NodeContext) -> Any:
    await ctx.clock.sleep(timedelta(seconds=2))
    ctx.state["slept"] = True
    return Park(key="after-sleep")


@node(outputs=["ok"], register=False)
async def sleep_then_answer(ctx: NodeContext) -> Any:
    await asyncio.sleep(0)  # a bare yield first
    await ctx.clock.sleep(timedelta(seconds=2))
    return Output("ok", update={"total": 2})


SEEN: list[str] = []


@node(outputs=["ok"], register=False)
async def sleep_long(ctx: NodeContext) -> Any:
    try:
        await ctx.clock.sleep(timedelta(seconds=30))
    except asyncio.CancelledError:
        SEEN.append(f"cancelled: {ctx.cancel_reason}")
        raise
    return "ok"


ENGINES: list[Engine] = []


@node(outputs=["ok"], register=False)
async def cancel_soon(ctx: NodeContext) -> Any:
    # The run is cancelled on the next loop turn: before the task that continues this
    # coroutine (fast path) first runs.
    asyncio.get_running_loop().call_soon(ENGINES[-1].cancel_nowait, ctx.run_id, "stop")
    try:
        await ctx.clock.sleep(timedelta(seconds=30))
    except asyncio.CancelledError:
        SEEN.append(f"cancelled: {ctx.cancel_reason}")
        raise
    return "ok"


@node(outputs=["ok"], execution="inline", register=False)
def gives_up(ctx: NodeContext) -> Any:
    raise Cancelled("nothing to do")  # as ctx.raise_if_cancelled() would


def two_tasks() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fast-park-two")
        .task("p", answer_now, {"ok": "q"})
        .task("q", park_keyed, {"ok": "done"}, timeout="PT10S")
        .terminal("done", "approved")
        .build()
    )


@node(outputs=["ok"], register=False)
async def flaky_then_park(ctx: NodeContext) -> Any:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return Park(key=f"retry-{ctx.run_id}")


def one(node_ref: Any, name: str = "one", **settings: Any) -> Flow:
    return (
        FlowBuilder(f"urn:test:flow:fast-park-{name}")
        .task("p", node_ref, {"ok": "done", "timeout": "late"}, **settings)
        .terminal("done", "approved")
        .terminal("late", "late")
        .reducer("total", "sum")
        .build()
    )


# -- comparing the two paths ------------


def _plain(value: Any, rid: str) -> str:
    return repr(value).replace(rid, "<run>")


async def _store_contents(engine: Engine, rid: str) -> Any:
    store = engine.store
    assert isinstance(store, MemoryStore)
    run = await store.get_run(rid)
    run.id = "<run>"
    return _plain(
        (
            run,
            await store.get_state(rid),
            sorted((await store.tokens(rid)), key=lambda t: t.id),
            [
                (e.kind, e.at, e.placement, e.attempt, e.token_id, e.data, e.seq)
                for e in await store.history(rid)
            ],
            list(await store.parks(run_id=rid)),
            [e for e in store.due_entries() if e.run_id == rid],
            list(await store.node_anchors(rid)),
        ),
        rid,
    )


def _result(result: RunResult) -> str:
    return _plain(result, result.run_id)


Drive = Callable[[Engine, VirtualClock, RunResult], Any]


class UnorderedClock(VirtualClock):
    """A virtual clock that, like the system clock, promises no order between timers due at one
    instant: the fast path then arms a node's deadline only when its attempt is handed over."""

    ties_in_order = False


async def _play(
    flow: Flow,
    *,
    hooked: bool,
    then: Drive | None = None,
    unordered: bool = False,
    **options: Any,
) -> tuple[str, str, str, list[str]]:
    """The first result, the last result (after ``then``), the store's contents, and the event
    kinds a hook saw."""
    seen: list[str] = []
    hooks: list[Callable[[EventRecord], None]] = [lambda e: seen.append(e.kind)] if hooked else []
    clock = (UnorderedClock if unordered else VirtualClock)(T0, autojump=True)
    async with running(clock=clock, hooks=hooks) as (engine, clock):
        ENGINES.append(engine)
        first = await engine.run(flow, **options)
        last = first
        if then is not None:
            await then(engine, clock, first)
            last = await engine.wait(first.run_id)
        contents = await _store_contents(engine, first.run_id)
    return _result(first), _result(last), contents, seen


async def _both(
    flow: Flow, then: Drive | None = None, *, unordered: bool = False, **options: Any
) -> tuple[str, str, str]:
    SEEN.clear()
    fast = await _play(flow, hooked=False, then=then, unordered=unordered, **options)
    seen_fast = list(SEEN)
    SEEN.clear()
    slow = await _play(flow, hooked=True, then=then, **options)
    assert seen_fast == SEEN
    assert fast[:3] == slow[:3]
    return fast[:3]


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many runs took the fast path (parked there, or handed over) and the general one."""
    count = {"fast": 0, "handed": 0, "general": 0}
    park_at_once = fastpark.park_at_once
    launch = RunExecutor.launch

    async def spy_fast(*args: Any) -> Any:
        out = await park_at_once(*args)
        if isinstance(out, RunResult):
            count["fast"] += 1
        elif out is not None:
            count["handed"] += 1
        return out

    def spy_launch(self: RunExecutor, entry: str | None) -> None:
        count["general"] += 1
        launch(self, entry)

    monkeypatch.setattr("flowtide.engine.engine.park_at_once", spy_fast)
    monkeypatch.setattr(RunExecutor, "launch", spy_launch)
    yield count


# -- parking at once ------------


@pytest.mark.parametrize(
    ("flow", "options"),
    [
        (one(park_keyed, "keyed", timeout="PT10S"), {}),
        (one(park_keyed, "keyed-no-timeout"), {}),
        (one(park_plain, "plain"), {}),
        (one(park_keyed, "run-deadline", timeout="PT10S"), {"deadline": "PT1H"}),
        (one(park_keyed, "instance", timeout="PT10S", timeout_anchor="instance"), {}),
    ],
    ids=["key-timeout", "key", "plain", "run-deadline", "instance-anchor"],
)
async def test_a_park_at_once_stores_and_returns_what_the_general_path_does(
    flow: Flow, options: dict[str, Any], paths: dict[str, int]
) -> None:
    result, _, _ = await _both(flow, input={"asked": 1}, **options)
    assert paths == {"fast": 1, "handed": 0, "general": 1}
    assert "PARKED" in result


async def test_a_park_by_the_reserved_output_commits_the_state_change(
    paths: dict[str, int],
) -> None:
    flow = (
        FlowBuilder("urn:test:flow:fast-park-by-name")
        .task("p", park_by_name, {"ok": "done"})
        .terminal("done")
        .build()
    )
    result, _, contents = await _both(flow, input={"drop": 1, "keep": [1]})
    assert paths["fast"] == 1
    assert "'by-name'" in result and "'note': 'waiting'" in contents and "'drop'" not in result


async def test_the_fast_park_is_signalled_and_times_out_as_usual(paths: dict[str, int]) -> None:
    flow = one(park_keyed, "signal", timeout="PT10S")

    async def signal(engine: Engine, clock: VirtualClock, first: RunResult) -> None:
        await engine.signal(key=f"k-{first.run_id}", output="ok", payload={"paid": True})

    async def expire(engine: Engine, clock: VirtualClock, first: RunResult) -> None:
        pass  # the clock jumps to the deadline by itself

    _, signalled, _ = await _both(flow, signal)
    _, expired, _ = await _both(flow, expire)
    assert "approved" in signalled and "'paid': True" in signalled
    assert "'late'" in expired
    assert paths["fast"] == 2


async def test_a_fast_park_is_resumed_and_signalled_by_another_engine() -> None:
    flow = one(park_keyed, "other-engine", timeout="PT10S")
    async with two_engines(flow, autojump=True) as (a, b, _clock, _store):
        first = await a.run(flow)
        await a.close()
        await b.signal(first.run_id, placement="p", output="ok")
        final = await b.wait(first.run_id)
        assert final.outcome == "approved"
        assert kinds(await b.history(first.run_id)) == [
            "run_started",
            "node_started",
            "parked",
            "signalled",
            "terminal_reached",
            "run_finished",
        ]


STORED: list[Any] = []


@node(outputs=["ok"], register=False)
async def looks(ctx: NodeContext) -> Any:
    store = ENGINES[-1].store
    assert isinstance(store, MemoryStore)
    # The memory store answers without suspending: the node still parks at once.
    run = await store.get_run(ctx.run_id)
    STORED.append(
        (
            run.lifecycle,
            [(t.placement, t.status.value) for t in await store.tokens(ctx.run_id)],
            [e.kind for e in await store.history(ctx.run_id)],
        )
    )
    return Park()


async def test_the_run_and_its_attempt_are_stored_before_the_node_runs(
    paths: dict[str, int],
) -> None:
    STORED.clear()
    async with running() as (engine, _clock):
        ENGINES.append(engine)
        await engine.run(one(looks, "looks"))
    assert STORED == [("running", [("p", "running")], ["run_started", "node_started"])]
    assert paths["fast"] == 1


# -- handing over to an executor ------------


@pytest.mark.parametrize(
    ("make", "outcome"),
    [
        (lambda: one(answer_now, "answer"), "completed"),
        (lambda: one(answer_now, "answer-timeout", timeout="PT10S"), "completed"),
        (lambda: one(raise_now, "raise"), "failed"),
        (lambda: one(gives_up, "gives-up"), "completed"),
        (two_tasks, "parked"),
        (lambda: one(stray_now, "stray"), "failed"),
        (lambda: one(sleep_then_park, "sleep-park", timeout="PT10S"), "parked"),
        (lambda: one(sleep_then_answer, "sleep-answer"), "completed"),
        (lambda: one(sleep_long, "sleep-timeout", timeout="PT10S"), "completed"),
        (
            lambda: one(flaky_then_park, "retry", retry={"backoff": "fixed", "initial": "PT1S"}),
            "parked",
        ),
    ],
    ids=[
        "output",
        "output-timeout",
        "raise",
        "cancelled-error",
        "two-tasks",
        "undeclared",
        "sleep-park",
        "sleep-output",
        "sleep-timeout",
        "retry-park",
    ],
)
@pytest.mark.parametrize("unordered", [False, True], ids=["ordered-clock", "unordered-clock"])
async def test_a_node_that_does_not_park_at_once_is_handed_over_with_the_same_history(
    make: Callable[[], Flow], outcome: str, unordered: bool, paths: dict[str, int]
) -> None:
    result, _, _ = await _both(make(), input={"total": 1}, unordered=unordered)
    assert paths == {"fast": 0, "handed": 1, "general": 1}
    assert f"Lifecycle.{outcome.upper()}" in result


async def test_a_run_cancelled_before_the_handed_over_attempt_resumes_cancels_it(
    paths: dict[str, int],
) -> None:
    result, _, _ = await _both(one(cancel_soon, "cancel-soon"))
    assert paths["handed"] == 1
    assert "CANCELLED" in result and "'stop'" in result
    assert SEEN == ["cancelled: abort"]


async def test_a_cancel_after_a_fast_park_and_while_a_handed_over_node_runs() -> None:
    async def cancel(engine: Engine, clock: VirtualClock, first: RunResult) -> None:
        await engine.cancel(first.run_id, "changed my mind")

    _, last, _ = await _both(one(park_keyed, "cancel-parked", timeout="PT10S"), cancel)
    assert "CANCELLED" in last

    async def run_and_cancel(flow: Flow, hooked: bool) -> tuple[str, str]:
        hooks = [lambda e: None] if hooked else []
        async with running(autojump=False, hooks=hooks) as (engine, clock):
            task = asyncio.ensure_future(engine.run(flow))
            await clock.settle()
            [rid] = [r.id for r in await engine.store.list_runs()]
            await clock.advance(timedelta(seconds=1))
            engine.cancel_nowait(rid, "late")
            result = await task
            return _result(result), await _store_contents(engine, rid)

    SEEN.clear()
    flow = one(sleep_long, "cancel-running", timeout="PT1M")
    fast = await run_and_cancel(flow, False)
    slow = await run_and_cancel(flow, True)
    assert fast == slow
    assert SEEN == ["cancelled: abort", "cancelled: abort"]


async def test_a_crash_during_the_first_node_is_resumed_by_a_fresh_engine() -> None:
    """The engine closes while the first node runs (as a crash would stop it): the store holds
    the started attempt, and a fresh engine re-runs it with the same attempt number."""

    async def crash_and_resume(hooked: bool) -> tuple[str, str]:
        flow = one(sleep_then_park, "crash", timeout="PT10S")
        hooks = [lambda e: None] if hooked else []
        async with two_engines(flow, autojump=False, hooks=hooks) as (a, b, clock, store):
            task = asyncio.ensure_future(a.run(flow))
            await clock.settle()
            [rid] = [r.id for r in await store.list_runs()]
            await a.close()
            with pytest.raises(EngineError):
                await task
            assert (await store.get_run(rid)).lifecycle == "running"
            handle = await b.resume(rid)
            await clock.advance(timedelta(seconds=2))
            parked = await b.wait_parked(rid)
            await b.signal(rid, placement="p", output="ok")
            final = await handle.result()
            assert final.outcome == "approved"
            return _result(parked), await _store_contents(b, rid)

    fast = await crash_and_resume(False)
    slow = await crash_and_resume(True)
    assert fast == slow


# -- when the fast path is not taken ------------


@node(outputs=["ok"], register=False)
def park_in_thread(ctx: NodeContext) -> Any:
    return Park()


@node(outputs=["ok"], execution="inline", register=False)
def phase_node(ctx: NodeContext) -> Any:
    return None


def _ineligible() -> list[tuple[Flow, dict[str, Any]]]:
    timers = [{"after": "PT1M", "output": "ok", "interrupting": True}]
    return [
        (one(park_in_thread, "thread"), {}),
        (one(park_keyed, "timers", timers=timers), {}),
        (one(park_keyed, "node-anchor", timeout="PT10S", timeout_anchor="node"), {}),
        (
            FlowBuilder("urn:test:flow:fast-park-pre")
            .phase("pre", "pre", phase_node)
            .task("p", park_keyed, {"ok": "done"})
            .terminal("done")
            .build(),
            {},
        ),
        (
            FlowBuilder("urn:test:flow:fast-park-wait")
            .wait("w", "PT1S", then="p")
            .task("p", park_keyed, {"ok": "done"})
            .terminal("done")
            .build(),
            {},
        ),
        (one(park_keyed, "deadline-over"), {"deadline": at(-1)}),
    ]


@pytest.mark.parametrize("case", range(6))
async def test_runs_the_fast_path_cannot_take_go_the_general_way(
    case: int, paths: dict[str, int]
) -> None:
    flow, options = _ineligible()[case]
    await _both(flow, **options)
    assert paths["fast"] == 0 and paths["handed"] == 0
    assert paths["general"] == 2


@node(outputs=["ok"], register=False)
async def slow_then_park(ctx: NodeContext) -> Any:
    # Synchronous work that takes two seconds (the virtual clock moved by hand).
    clock = ctx.clock
    assert isinstance(clock, VirtualClock)
    clock._now += timedelta(seconds=2)
    return Park()


@pytest.mark.parametrize(
    ("flow", "options"),
    [
        (one(slow_then_park, "window-over", timeout="PT1S", timeout_anchor="instance"), {}),
        (one(slow_then_park, "run-deadline-over"), {"deadline": "PT1S"}),
    ],
    ids=["window", "run-deadline"],
)
async def test_a_park_after_its_window_or_the_run_deadline_is_handed_over(
    flow: Flow, options: dict[str, Any], paths: dict[str, int]
) -> None:
    result, _, _ = await _both(flow, **options)
    assert paths == {"fast": 0, "handed": 1, "general": 1}
    # The general path too returns the run parked when its deadline passed during the node
    # (the deadline is fired after); a window over at the park times out at once.
    assert ("TIMED_OUT" in result or "'late'" in result) == flow.id.endswith("window-over")


async def test_a_hook_or_start_takes_the_general_path(paths: dict[str, int]) -> None:
    flow = one(park_keyed, "start", timeout="PT10S")
    async with running() as (engine, _clock):
        handle = await engine.start(flow)
        handle.cancel(reason="changed my mind")
        result = await handle.result()
        history = await engine.history(result.run_id)
    # start() returns before any node runs: a cancel then means no node ran.
    assert kinds(history) == ["run_finished"]
    assert result.lifecycle is Lifecycle.CANCELLED
    async with running() as (engine, _clock):
        handle = await engine.start(flow)
        parked = await engine.wait_parked(handle.run_id)
        await engine.signal(handle.run_id, placement="p", output="ok")
        assert (await handle.result()).outcome == "approved"
    assert parked.lifecycle is Lifecycle.PARKED
    assert paths == {"fast": 0, "handed": 0, "general": 2}


@pytest.mark.parametrize("anchor", ["park", "instance"])
async def test_a_park_later_than_the_start_re_arms_its_window(
    anchor: str, paths: dict[str, int]
) -> None:
    # The park's instant is not the start's: its window is resolved again (not the start's).
    flow = one(slow_then_park, f"later-park-{anchor}", timeout="PT10S", timeout_anchor=anchor)
    result, _, contents = await _both(flow)
    assert paths == {"fast": 1, "handed": 0, "general": 1}
    assert "PARKED" in result and at(2).isoformat() in contents


def test_the_parked_result_is_the_one_the_constructors_build() -> None:
    from flowtide.engine.result import ParkedToken, parked_result

    built = parked_result("r", {"a": 1}, "r.1", "p", "k", at(3), {"x": [1]}, at(1))
    expected = RunResult(
        run_id="r",
        lifecycle=Lifecycle.PARKED,
        outcome=None,
        state={"a": 1},
        parked=(ParkedToken("r.1", "p", "k", at(3), {"x": [1]}, at(1)),),
    )
    assert built == expected and repr(built) == repr(expected)
    assert built.to_dict() == expected.to_dict()
    assert RunResult.from_dict(built.to_dict()) == expected


def test_the_parks_due_entry_is_the_one_the_constructor_builds() -> None:
    from flowtide.store import DueEntry

    built = fastpark._due(at(3), "r", "r.1", "timeout")
    expected = DueEntry(at(3), "r", "r.1", "timeout")
    assert built == expected and repr(built) == repr(expected) and hash(built) == hash(expected)


@pytest.mark.parametrize("anchor", ["park", "instance", None])
def test_the_window_data_is_the_windows_own(anchor: str | None) -> None:
    from flowtide.engine.deadlines import resolve_window

    extra = {"timeout_anchor": anchor} if anchor else {}
    plan = Engine(flows=[one(park_plain, f"window-{anchor}", timeout="PT10.5S", **extra)]).plan(
        f"urn:test:flow:fast-park-window-{anchor}"
    )
    fast = plan.fast_entry(plan.entry_target(None))
    assert fast is not None
    for created in (at(1), at(5)):
        window = resolve_window(fast.settings, now=at(5), run_created_at=created)
        assert fastpark._window(fast, at(5), created) == (window.deadline, window.to_data())


def test_run_ids_are_random_version_4_uuids() -> None:
    import uuid

    from flowtide.engine.engine import new_run_id

    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    for rid in ids:
        parsed = uuid.UUID(hex=rid)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, rid)


async def test_a_fast_park_on_the_system_clock(paths: dict[str, int]) -> None:
    """On the system clock no deadline timer is armed for an attempt that parks at once; one
    that goes on after its first step gets its deadline when it is handed over."""
    flow = one(park_keyed, "system-clock", timeout="PT1H")
    later = one(sleep_then_answer, "system-clock-later", timeout="PT1H")
    async with Engine() as engine:
        parked = await engine.run(flow)
        assert parked.lifecycle is Lifecycle.PARKED
        await engine.signal(parked.run_id, placement="p", output="ok")
        assert (await engine.wait(parked.run_id)).outcome == "approved"
        assert paths["fast"] == 1
        task = asyncio.ensure_future(engine.run(later))
        await asyncio.sleep(0)  # run() hands the attempt over in its first step
        [ex] = engine._runs.values()
        [(placement, scope)] = ex._running.values()
        assert placement == "p"
        engine.cancel_nowait(ex.run_id, "enough")
        result = await task
        assert result.lifecycle is Lifecycle.CANCELLED and scope.cancel_called
        assert paths["handed"] == 1


@node(outputs=["ok"], register=False)
async def cancels_itself(ctx: NodeContext) -> Any:
    ENGINES[-1].cancel_nowait(ctx.run_id, "self")
    return Park(key="never")


@node(outputs=["ok"], register=False)
async def cancels_itself_then_sleeps(ctx: NodeContext) -> Any:
    await ENGINES[-1].cancel(ctx.run_id, "self")
    # The node's own task is not cancelled under it: it goes on to its end.
    await ctx.clock.sleep(timedelta(seconds=1))
    SEEN.append(f"woke: {ctx.cancel_reason}")
    return "ok"


@pytest.mark.parametrize(
    "make", [cancels_itself, cancels_itself_then_sleeps], ids=["park", "sleep"]
)
async def test_a_node_that_cancels_its_own_run_in_its_first_step(
    make: Any, paths: dict[str, int]
) -> None:
    result, _, contents = await _both(one(make, make.id.rsplit(":", 1)[-1]))
    assert "CANCELLED" in result and "'self'" in result
    assert "('parked', datetime" not in contents  # no parked event: cancelled before
    assert paths == {"fast": 0, "handed": 1, "general": 1}
    if make is cancels_itself_then_sleeps:
        assert SEEN == ["woke: abort"]


HANDLES: list[Any] = []


@node(outputs=["ok"], register=False)
async def resumes_itself(ctx: NodeContext) -> Any:
    # The run is live in this engine: resume gives a handle to it, and runs nothing again.
    HANDLES.append(await ENGINES[-1].resume(ctx.run_id))
    SEEN.append("ran")
    return Park(key="self")


async def test_resume_of_a_run_whose_first_step_runs_gives_its_handle(
    paths: dict[str, int],
) -> None:
    async def signal(engine: Engine, clock: VirtualClock, first: RunResult) -> None:
        await engine.signal(first.run_id, placement="p", output="ok")
        assert (await HANDLES[-1].result()).outcome == "approved"

    _, last, _ = await _both(one(resumes_itself, "resumes-itself"), signal)
    assert "approved" in last and SEEN == ["ran"]
    assert paths["fast"] == 1
