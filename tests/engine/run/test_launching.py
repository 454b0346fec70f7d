"""A run's start through a stand-in for the executor, without an engine: with no pre phase the
run's first commit (with which the run is created) records its start and its entrypoint's token
with its first attempt started, and once it is stored the token is driven in the start's task;
the run's deadline is armed, or cancels the run at once when it is over already."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowtide.engine.timing.scope import CancelReason
from flowtide.store.base import TokenStatus
from tests.engine.run.stand_in import DrivenRun, one_task_run

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run() -> DrivenRun:
    ex = one_task_run("urn:test:flow:launching", T0)
    ex.started = False
    ex.view.run.lifecycle = "pending"
    return ex


async def test_the_first_commit_starts_the_run_and_its_first_attempt() -> None:
    ex = run()
    assert ex.run_start.entry_target(None) == "ask"
    first = ex.run_start.begin(None)
    assert ex.commits == [] and ex.driven == []  # (the creation stores it)
    # (The run is created with its record as it is now, started.)
    assert first.run is None and ex.view.run.lifecycle == "running" and not ex.started
    (token,) = first.tokens
    assert token.placement == "ask" and token.status is S.RUNNING
    assert [e.kind for e in first.events] == ["run_started", "node_started"]
    assert token.id in ex.prestarted
    await ex.run_start.main()
    assert ex.started and ex.commits == [] and ex.driven == [token.id]  # (in its own task)


async def test_the_run_deadline_is_armed_or_cancels_a_run_over_it() -> None:
    later = run()
    later.view.run.deadline = T0 + timedelta(minutes=1)
    later.run_start.arm_deadline()
    assert later.deadline_timer is not None and later.root.cancellation is None
    over = run()
    over.view.run.deadline = T0
    over.run_start.arm_deadline()
    assert over.root.cancellation is not None
    assert over.root.cancellation.reason is CancelReason.RUN_DEADLINE
