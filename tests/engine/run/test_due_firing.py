"""Due entries fired through a stand-in for the executor, without an engine: a wait's end hands
its token to a task of its own, a stale entry is removed alone, the run's deadline cancels the
run, an entry being fired is not fired twice, and requests are fired first."""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.children import child_run_id
from flowtide.engine.run.due import DEADLINE, RESUME, SIGNAL, DuePurpose
from flowtide.engine.run.executor.firing import DueFiring
from flowtide.engine.timing.scope import CancelReason
from flowtide.store.base import Expect, TokenStatus
from tests.engine.run.stand_in import RecordedRun

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@node(outputs=["done"], register=False)
def work(ctx: NodeContext) -> str:
    return "done"


class FiringRun(RecordedRun):
    """A recorded run whose side steps are kept, to be run when the test says."""

    def __init__(self) -> None:
        b = FlowBuilder("urn:test:flow:firing")
        b.wait("nap", "PT5M", then="work")
        b.task("work", work, {"done": "end"})
        b.terminal("end")
        super().__init__(FlowPlan.build(b.build(), lambda ref: None), {"work": work}, T0)
        self.aux: list[Coroutine[Any, Any, Any]] = []
        self.due_firing = DueFiring(self)

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.aux.append(coro)

    async def run_aux(self) -> None:
        while self.aux:
            await self.aux.pop(0)


async def test_a_waits_end_hands_its_token_to_a_task_and_commits_nothing_alone() -> None:
    ex = FiringRun()
    t = ex.token("nap", S.WAITING)
    t.due = T0
    entry = RESUME.entry(T0, "r", t.id)
    assert ex.due_firing.fire_all([entry]) == 1
    assert not ex.due_firing.fire_due(entry, RESUME)  # (being fired already)
    await ex.run_aux()
    assert t.status is S.READY and ex.spawned == [t.id]
    assert ex.committer.expect[t.id] == Expect(S.WAITING, t.epoch)
    assert ex.committer.fired[t.id] == [entry]  # (the token's next commit removes it)
    assert ex.commits == [] and ex.due_firing.firing == set()


async def test_a_stale_entry_is_removed_on_its_own() -> None:
    ex = FiringRun()
    t = ex.token("nap", S.WAITING)
    t.due = T0 + timedelta(minutes=1)  # (it waits again, for a later instant)
    gone = RESUME.entry(T0, "r", "r.99")
    stale = RESUME.entry(T0, "r", t.id)
    assert ex.due_firing.fire_all([gone, stale]) == 2
    await ex.run_aux()
    assert [c.due_fired for c in ex.commits] == [[gone], [stale]]
    assert ex.spawned == [] and ex.committer.fired == {}


async def test_the_run_deadline_cancels_the_run() -> None:
    ex = FiringRun()
    ex.view.run.deadline = T0
    assert ex.due_firing.fire_all([DEADLINE.entry(T0, "r", "r")]) == 1
    assert ex.root.cancellation is not None
    assert ex.root.cancellation.reason is CancelReason.RUN_DEADLINE
    assert ex.aux == []


async def test_requests_are_fired_before_the_rest() -> None:
    ex = FiringRun()
    t = ex.token("nap", S.WAITING)
    ex.due_firing.fire_all([RESUME.entry(T0, "r", t.id), SIGNAL.entry(T0, "r", "q1")])
    assert [c.cr_code.co_name for c in ex.aux] == ["_fire_request", "_fire"]  # type: ignore[attr-defined]
    for c in ex.aux:
        c.close()


async def test_a_childs_wake_is_left_to_the_token_that_waits_for_that_child() -> None:
    """Its task moves it on by the child's end, and that move removes the entry: until then the
    entry stays (the run let go meanwhile is woken by it again)."""
    ex = FiringRun()
    t = ex.token("work", S.RUNNING)
    child = child_run_id("r", t.id, "work", t.visit, t.attempt)
    wake = DuePurpose.child_ended(child).entry(T0, "r", t.id)
    assert ex.due_firing.fire_all([wake]) == 0  # (no step is taken for it)
    assert ex.aux == [] and ex.due_firing.firing == set()
    assert ex.commits == [] and ex.spawned == [] and ex.committer.fired == {}


async def test_the_wake_of_a_child_the_token_no_longer_waits_for_is_removed_alone() -> None:
    ex = FiringRun()
    t = ex.token("work", S.RUNNING)
    earlier = child_run_id("r", t.id, "work", t.visit - 1, t.attempt)
    other = child_run_id("r", t.id, "nap", t.visit, t.attempt)
    wakes = [DuePurpose.child_ended(c).entry(T0, "r", t.id) for c in (earlier, other)]
    bare = DuePurpose.child_ended("").entry(T0, "r", t.id)  # (names no child)
    assert ex.due_firing.fire_all([*wakes, bare]) == 3
    await ex.run_aux()
    assert [c.due_fired for c in ex.commits] == [[w] for w in [*wakes, bare]]
    assert t.status is S.RUNNING and ex.spawned == []
