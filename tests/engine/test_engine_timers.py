"""Escalation timers: non-interrupting and interrupting, each anchor, parked or running, fired
once each per visit, cancelled when the token leaves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide.authoring import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, Lease, MemoryStore, RunRecord
from tests.engine.engine_helpers import T0, at, of_kind, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["done"])
async def warmup(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=1))
    return "done"


@node(outputs=["approved"])
async def approval(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park()
    return "approved"


@node(outputs=["sent"], execution="inline")
def remind(ctx: NodeContext) -> str:
    return "sent"


@node(outputs=["again", "stop"], execution="inline")
def bump(ctx: NodeContext) -> str:
    ctx.state["escalations"] = ctx.state.get("escalations", 0) + 1
    return "stop" if ctx.state["escalations"] >= 2 else "again"


HERE = "tests.engine.test_engine_timers"


def ladder(anchor: str) -> Flow:
    return load_flow(
        f"""
id: urn:test:flow:ladder-{anchor}
version: "1"
entrypoints: {{main: warmup}}
placements:
  - {{id: warmup, kind: task, node: "{HERE}:warmup", routes: {{done: ask}}}}
  - id: ask
    kind: task
    node: "{HERE}:approval"
    settings:
      timeout: PT12H
      timers:
        - {{after: PT10M, output: remind, interrupting: false, anchor: {anchor}}}
        - {{after: PT30M, output: escalate, interrupting: true, anchor: {anchor}}}
    routes: {{approved: ok, remind: remind, escalate: bump}}
  - {{id: remind, kind: task, node: "{HERE}:remind", routes: {{sent: reminded}}}}
  - {{id: bump, kind: task, node: "{HERE}:bump", routes: {{again: ask, stop: stopped}}}}
  - {{id: ok, kind: terminal, outcome: approved}}
  - {{id: reminded, kind: terminal, outcome: reminded}}
  - {{id: stopped, kind: terminal, outcome: stopped}}
""",
        format="yaml",
    )


def fired(history: Any) -> list[tuple[Any, str, bool]]:
    return [
        (e.at, e.data["output"], e.data["interrupting"])
        for e in of_kind(history, "timer_fired")
        if e.data.get("purpose") == "timer"
    ]


M = 60


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        # parked at 1:00; timers from each park: 11:00, 31:00; re-entry at 31:00: 41:00, 61:00
        ("park", [(11 * M, "remind", False), (31 * M, "escalate", True),
                  (41 * M, "remind", False), (61 * M, "escalate", True)]),
        # from the run's creation: 10:00, 30:00; on re-entry both are past: they fire at once
        ("instance", [(10 * M, "remind", False), (30 * M, "escalate", True),
                      (30 * M, "remind", False), (30 * M, "escalate", True)]),
        # from the first arrival (1:00): 11:00, 31:00; on re-entry both are past
        ("node", [(11 * M, "remind", False), (31 * M, "escalate", True),
                  (31 * M, "remind", False), (31 * M, "escalate", True)]),
    ],
)  # fmt: skip
async def test_timers_of_each_kind_with_each_anchor(anchor: str, expected: list[Any]) -> None:
    async with running() as (engine, _clock):
        handle = await engine.start(ladder(anchor))
        result = await handle.result()
        history = await engine.history(handle.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["escalations"] == 2
    assert fired(history) == [(at(s), o, i) for s, o, i in expected]
    reminded = [e for e in of_kind(history, "terminal_reached") if e.placement == "reminded"]
    assert len(reminded) == 2  # each reminder is a token of its own that ends on its own


async def test_timers_are_cancelled_when_the_token_leaves() -> None:
    async with running(autojump=False) as (engine, clock):
        handle = await engine.start(ladder("park"))
        await clock.advance_to(at(5 * M))
        await engine.signal(handle.run_id, placement="ask", output="approved")
        result = await handle.result()
        assert list(await engine.store.due_of(handle.run_id)) == []
        await clock.advance(timedelta(hours=2))
        history = await engine.history(handle.run_id)
    assert result.outcome == "approved"
    assert fired(history) == []


@node(outputs=["approved"])
async def slow_approval(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(hours=2))
    return "approved"


async def test_timers_fire_while_the_node_runs_too() -> None:
    # A running node: the reminder starts a token beside it, the escalation cancels it.
    flow = load_flow(
        f"""
id: urn:test:flow:running-ladder
version: "1"
entrypoints: {{main: ask}}
placements:
  - id: ask
    kind: task
    node: "{HERE}:slow_approval"
    settings:
      timers:
        - {{after: PT10M, output: remind}}
        - {{after: PT30M, output: escalate, interrupting: true}}
    routes: {{approved: ok, remind: remind, escalate: bump}}
  - {{id: remind, kind: task, node: "{HERE}:remind", routes: {{sent: reminded}}}}
  - {{id: bump, kind: task, node: "{HERE}:bump", routes: {{again: stopped, stop: stopped}}}}
  - {{id: ok, kind: terminal, outcome: approved}}
  - {{id: reminded, kind: terminal, outcome: reminded}}
  - {{id: stopped, kind: terminal, outcome: stopped}}
""",
        format="yaml",
    )
    async with running() as (engine, _clock):
        handle = await engine.start(flow)
        result = await handle.result()
        history = await engine.history(handle.run_id)
    assert fired(history) == [(at(600), "remind", False), (at(1800), "escalate", True)]
    # The reminder's branch ends at its own terminal first; the run's own branch decides.
    assert result.outcome == "stopped" and result.terminals == ("reminded", "stopped")
    assert [e.placement for e in of_kind(history, "terminal_reached")] == ["reminded", "stopped"]
    assert of_kind(history, "node_finished")[0].placement == "remind"  # ask never finished


# -- the escalation-ladder example ---------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NODE = "urn:flowtide:example:node:"


@node(id=NODE + "await-approval", outputs=["approved", "rejected"], parks=True, register=False)
async def await_approval(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=f"approval-{ctx.run_id}")
    return "approved" if ctx.signal.get("ok") else "rejected"


@node(id=NODE + "send-reminder", outputs=["sent"], register=False)
async def send_reminder(ctx: NodeContext) -> str:
    return "sent"


@node(id=NODE + "escalate", outputs=["escalated", "top-reached"], register=False)
async def escalate(ctx: NodeContext) -> str:
    ctx.state["level"] = ctx.state.get("level", 0) + 1
    return "escalated" if ctx.state["level"] < 5 else "top-reached"


def ladder_registry() -> NodeRegistry:
    reg = NodeRegistry()
    for impl in (await_approval, send_reminder, escalate):
        reg.register(impl)
    return reg


async def test_the_escalation_ladder_example_expires_at_twelve_hours() -> None:
    reg = ladder_registry()
    flow = load_flow(EXAMPLES / "escalation-ladder.yaml", registry=reg)
    async with running(registry=reg) as (engine, _clock):
        handle = await engine.start(flow)
        result = await handle.result()
        history = await engine.history(handle.run_id)
    # The reminders' own terminal came first (the run's outcome); the approval expired last.
    assert result.terminals[-1] == "expired"
    (end,) = of_kind(history, "run_finished")
    assert end.at == at(12 * 3600)  # the node anchor's window, not extended by re-entries
    escalations = [e.at for e in of_kind(history, "timer_fired") if e.data.get("interrupting")]
    assert escalations == [at(4 * 3600), at(8 * 3600)]  # at 12:00 the timeout comes first
    assert result.state["level"] == 2


async def test_explain_run_after_the_escalation_ladder_expired() -> None:
    reg = ladder_registry()
    flow = load_flow(EXAMPLES / "escalation-ladder.yaml", registry=reg)
    async with running(registry=reg) as (engine, _clock):
        handle = await engine.start(flow)
        await handle.result()
        (explained,) = await engine.explain_run(handle.run_id)
    # Escalated twice, back each time: the third visit expired on the first visit's window.
    assert (explained.placement, explained.visit, explained.status) == (
        "await-approval",
        3,
        "timed_out",
    )
    assert (explained.anchor_at, explained.anchor_visit, explained.deadline) == (
        at(0),
        1,
        at(12 * 3600),
    )
    assert explained.timeout_source == "node type"
    assert [t.fired for t in explained.timers] == [True, False]
    assert "timer 1 (interrupting, output 'escalate'): anchor park + PT4H -> did not fire" in str(
        explained
    )


async def test_the_escalation_ladder_example_approved_after_a_reminder() -> None:
    reg = ladder_registry()
    flow = load_flow(EXAMPLES / "escalation-ladder.yaml", registry=reg)
    async with running(autojump=False, registry=reg) as (engine, clock):
        first = await engine.run(flow)
        await clock.advance_to(at(90 * M))
        explained = await engine.explain(first.run_id, placement="await-approval")
        await engine.signal(key=f"approval-{first.run_id}", payload={"ok": True})
        result = await engine.wait(first.run_id)
        history = await engine.history(first.run_id)
    assert result.terminals == ("reminder-sent", "approved")
    assert fired(history) == [(at(3600), "remind", False)]
    assert explained.timeout_source == "node type"
    assert [t.fired for t in explained.timers] == [True, False]
    assert [t.due for t in explained.timers] == [None, at(4 * 3600)]
    assert "timer 1 (interrupting, output 'escalate')" in str(explained)


def test_engine_is_importable_from_the_package() -> None:
    import flowtide

    assert flowtide.Engine is Engine


@node(outputs=["done"])
async def long_work(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(hours=1))
    return "done"


@node(outputs=["sent"], execution="inline")
def escalated(ctx: NodeContext) -> str:
    return "sent"


def gap_flow(settings: str) -> Flow:
    return load_flow(
        f"""
id: urn:test:flow:timer-gap
version: "1"
entrypoints: {{main: work}}
placements:
  - id: work
    kind: task
    node: "{HERE}:long_work"
    settings: {settings}
    routes: {{done: finished, escalate: escalate, timeout: timed-out}}
  - {{id: escalate, kind: task, node: "{HERE}:escalated", routes: {{sent: escalated}}}}
  - {{id: finished, kind: terminal, outcome: finished}}
  - {{id: escalated, kind: terminal, outcome: escalated}}
  - {{id: timed-out, kind: terminal, outcome: timed-out}}
""",
        format="yaml",
    )


class _SlowStartStore(MemoryStore):
    """The commit that starts ``work``'s attempt takes ``minutes`` of the clock (a slow store),
    so the attempt's scope is registered only after that."""

    def __init__(self, clock: VirtualClock, minutes: int) -> None:
        super().__init__()
        self.clock = clock
        self.minutes = minutes
        self.slowed = False

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        await self._slowed(commit)
        return await super().commit(commit)

    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        if commit is not None:  # (the run is created with the commit of its first step)
            await self._slowed(commit)
        return await super().create_run(run, state, commit, lease=lease)

    async def _slowed(self, commit: Commit) -> None:
        starts = any(e.kind == "node_started" and e.placement == "work" for e in commit.events)
        if starts and not self.slowed:
            self.slowed = True
            await self.clock.sleep(timedelta(minutes=self.minutes))


async def _start_then_pass_time(flow: Flow, minutes: int) -> tuple[Any, Any]:
    """The clock passes ``minutes`` while the node's start is being committed, i.e. before its
    cancel scope is registered."""
    clock = VirtualClock(T0, autojump=True)
    async with running(clock=clock, store=_SlowStartStore(clock, minutes)) as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    return result, history


async def test_interrupting_timer_due_before_the_scope_is_registered_still_fires() -> None:
    flow = gap_flow("{timers: [{after: PT10M, output: escalate, interrupting: true}]}")
    result, history = await _start_then_pass_time(flow, 15)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "escalated"
    # Fired by the sweeper at 00:10; the attempt is cancelled (and the event recorded) as soon as
    # its scope is registered, once the clock has passed to 00:15.
    assert fired(history) == [(at(900), "escalate", True)]
    assert of_kind(history, "node_finished")[0].placement == "escalate"


async def test_node_timeout_due_before_the_scope_is_registered_times_out_at_once() -> None:
    flow = gap_flow("{timeout: PT10M}")
    result, history = await _start_then_pass_time(flow, 15)
    assert result.outcome == "timed-out"
    (timed_out,) = of_kind(history, "node_timed_out")
    assert timed_out.data["deadline"] == at(600).isoformat()
    assert of_kind(history, "node_finished") == []
