"""A branch a non-interrupting timer started (a reminder's) ends at its own terminal, listed in
the run's ``terminals``, and never sets the run's outcome: the run's own branch does, on every
store and across the run being let go and rebuilt."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import T0, freeze, fresh_store, raw_flow, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["approved", "rejected"], parks=True)
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=f"ask-{ctx.run_id}")
    return "approved" if ctx.signal.get("ok") else "rejected"


@node(outputs=["sent", "again"])
async def remind(ctx: NodeContext) -> str:
    ctx.state["reminded"] = ctx.state.get("reminded", 0) + 1
    return "sent"


@node(outputs=["done"])
async def note(ctx: NodeContext) -> str:
    return "done"


def flow() -> Flow:
    here = __name__
    return raw_flow(
        [
            {
                "id": "ask",
                "kind": "task",
                "node": f"{here}:ask",
                "settings": {"timers": [{"after": "PT1H", "output": "remind"}]},
                "routes": {"approved": "approved", "rejected": "rejected", "remind": "remind"},
            },
            # The reminder's branch splits: both of its terminals are a reminder's.
            {
                "id": "remind",
                "kind": "task",
                "node": f"{here}:remind",
                "routes": {"sent": ["note", "reminded"]},
            },
            {"id": "note", "kind": "task", "node": f"{here}:note", "routes": {"done": "noted"}},
            {"id": "reminded", "kind": "terminal", "outcome": "reminded"},
            {"id": "noted", "kind": "terminal", "outcome": "noted"},
            {"id": "approved", "kind": "terminal", "outcome": "approved"},
            {"id": "rejected", "kind": "terminal", "outcome": "rejected"},
        ],
        id="urn:test:flow:side-branches",
    )


async def test_a_reminders_terminal_never_sets_the_runs_outcome() -> None:
    async with running(autojump=False) as (engine, clock):
        parked = await engine.run(flow())
        assert parked.lifecycle is Lifecycle.PARKED
        await clock.advance(timedelta(minutes=90))  # the reminder's branch ends meanwhile
        again = await engine.wait_parked(parked.run_id)
        assert again.lifecycle is Lifecycle.PARKED and again.state == {"reminded": 1}
        # (let go with its reminder's terminals: rebuilt from the store for the signal)
        await engine.signal(key=f"ask-{parked.run_id}", payload={"ok": True})
        result = await engine.wait(parked.run_id)
        stored = await engine.store.get_run(parked.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "approved" == stored.outcome
    assert sorted(result.terminals[:2]) == ["noted", "reminded"]
    assert result.terminals[2] == "approved"


@node(outputs=["approved"])
async def slow_decision(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=100))
    return "approved"


def running_flow() -> Flow:
    here = __name__
    return raw_flow(
        [
            {
                "id": "decide",
                "kind": "task",
                "node": f"{here}:slow_decision",
                "settings": {"timers": [{"after": "PT10M", "output": "remind"}]},
                "routes": {"approved": "approved", "remind": "remind"},
            },
            {"id": "remind", "kind": "task", "node": f"{here}:note", "routes": {"done": "noted"}},
            {"id": "noted", "kind": "terminal", "outcome": "noted"},
            {"id": "approved", "kind": "terminal", "outcome": "approved"},
        ],
        id="urn:test:flow:side-branches-running",
    )


async def test_a_run_taken_over_after_a_reminders_terminal_keeps_its_own_outcome() -> None:
    # Never let go (its node runs): the worker that takes it over rebuilds it from its history.
    flow = running_flow()
    clock = VirtualClock(T0)
    store = fresh_store()
    first = Engine(clock=clock, store=store, owner="first", lease_ttl=timedelta(seconds=30))
    second = Engine(
        clock=clock, store=store, owner="second", flows=[flow], lease_ttl=timedelta(seconds=30)
    )
    try:
        handle = await first.start(flow)
        await clock.advance(timedelta(minutes=20))  # the reminder's branch ended at 'noted'
        await freeze(first)
        second.sweeper  # noqa: B018 - the second worker looks for work
        await clock.advance(timedelta(minutes=200))
        result = await second.wait(handle.run_id)
    finally:
        await first.close()
        await second.close()
        await clock.aclose()
        await store.close()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.terminals == ("noted", "approved") and result.outcome == "approved"
