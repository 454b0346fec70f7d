"""The attempt runner runs a node's code once, knowing no tokens: what it returned, changed,
raised, or why it did not run; without an engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.clock import VirtualClock
from flowtide.engine import NodeContext, Output, Park
from flowtide.engine.errors import EngineError, UndeclaredOutputError
from flowtide.engine.run.attempts import (
    NO_HOOKS,
    AttemptCall,
    AttemptRunner,
    Running,
    StartHooks,
)
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import CancelReason, CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.instruments import AttemptOutcome, NoInstruments
from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.model.settings import NodeSettings
from flowtide.store.base import RunRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@node(outputs=["done"], register=False)
async def adds(ctx: NodeContext) -> Output:
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    return Output("done", update={"note": "hi"})


@node(outputs=["done"], register=False)
def sync_adds(ctx: NodeContext) -> str:
    ctx.state["n"] = 1
    return "done"


@node(outputs=["done"], register=False)
async def says_other(ctx: NodeContext) -> str:
    return "other"


@node(outputs=["done"], register=False)
async def fails(ctx: NodeContext) -> str:
    raise ValueError("no")


@node(outputs=["done"], register=False)
async def parks(ctx: NodeContext) -> Park:
    return Park(key="k")


class Observed(NoInstruments):
    """The attempts the runner reports, each with how it ended and how long it ran."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, float]] = []

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        self.attempts.append((outcome, seconds))


@dataclass
class Host:
    """What the runner uses of its host."""

    clock: VirtualClock = field(default_factory=lambda: VirtualClock(T0))
    threads: NodeThreads = field(default_factory=lambda: NodeThreads(1))
    thread_slots: ThreadSlots = field(default_factory=lambda: ThreadSlots(1))
    output_contracts: None = None
    max_value_bytes: int | None = None
    executes: bool = True
    instruments: Observed = field(default_factory=Observed)


def runner() -> tuple[AttemptRunner, Running]:
    flow = FlowBuilder("urn:test:flow:attempts").terminal("end").build()
    running: Running = {}
    run = RunRecord("r", flow.id, flow.version, "running", T0)
    host = cast(RunHost, Host())
    return AttemptRunner(host, run, flow, StateMerger(flow.reducers), running), running


async def attempt(
    impl: Any,
    state: dict[str, Any] | None = None,
    hooks: StartHooks = NO_HOOKS,
    **kw: Any,
) -> tuple[Any, AttemptRunner]:
    r, _ = runner()
    call = AttemptCall(
        impl=cast(NodeImplementation, impl),
        settings=NodeSettings(),
        placement="a",
        state=state or {},
        parent=CancelScope(None),
        key="k1",
        attempt=1,
        visit=1,
        **kw,
    )
    got = await r.invoke(call, hooks)
    return got, r


async def test_an_attempt_returns_its_output_and_what_it_changed() -> None:
    got, r = await attempt(adds, {"n": 1})
    assert (got.kind, got.output, dict(got.update)) == ("ok", "done", {"note": "hi"})
    assert got.changes == ({"n": 2}, [])
    assert r.running == {}  # (its scope is registered while it runs only)
    assert cast(Host, r.host).instruments.attempts == [("ok", 0.0)]  # (virtual time: none)


async def test_a_sync_node_runs_in_a_thread_under_a_slot() -> None:
    got, r = await attempt(sync_adds)
    assert got.kind == "ok" and got.changes == ({"n": 1}, [])
    assert r.host.thread_slots.try_take()  # (the slot went back)
    r.host.threads.shutdown(wait=True)


async def test_an_error_an_undeclared_output_and_a_park_where_none_may_park() -> None:
    failed, _ = await attempt(fails)
    assert failed.kind == "error" and isinstance(failed.error, ValueError)
    other, _ = await attempt(says_other)
    assert other.kind == "error" and isinstance(other.error, UndeclaredOutputError)
    parked, _ = await attempt(parks)
    assert parked.kind == "error" and isinstance(parked.error, EngineError)
    allowed, _ = await attempt(parks, hooks=StartHooks(parkable=True))
    assert allowed.kind == "park" and allowed.park is not None and allowed.park.key == "k"


async def test_an_attempt_past_its_window_or_interrupted_before_it_starts_does_not_run() -> None:
    late, _ = await attempt(adds, deadline=T0 - timedelta(seconds=1))
    assert late.kind == "timeout" and late.changes is None
    stopped, _ = await attempt(adds, hooks=StartHooks(interrupted=lambda: True))
    assert stopped.kind == "cancelled" and stopped.cancellation is not None
    assert stopped.cancellation.reason is CancelReason.TIMER
