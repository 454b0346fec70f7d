"""Arming applied to a run's view without an engine: an attempt's start marks its token and
arms its window, a node anchor is kept in the view, a scatter item's anchor is committed once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.view import RunView
from flowtide.model.settings import NodeSettings, TimeoutAnchor
from flowtide.store.base import Commit, RunRecord, TokenRecord, TokenStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@node(outputs=["done"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def arming() -> tuple[Arming, list[Commit], set[str]]:
    flow = FlowBuilder("urn:test:flow:arming").task("a", step, {"done": "end"}).terminal("end")
    plan = FlowPlan.build(flow.build(), lambda ref: None)
    commits: list[Commit] = []
    starting: set[str] = set()

    async def commit(c: Commit) -> bool:
        commits.append(c)
        return True

    view = RunView(RunRecord("r", plan.flow.id, "1", "running", T0), {})
    return Arming(view, plan, VirtualClock(T0), starting, commit), commits, starting


def token() -> TokenRecord:
    return TokenRecord("r.1", "r", "a", TokenStatus.READY, visit=1, created_at=T0)


def test_an_attempt_start_marks_its_token_running_and_starting() -> None:
    part, commits, starting = arming()
    t = token()
    started, anchors, due = part.start_attempt(t, "a", "step", NodeSettings())
    assert t.status is TokenStatus.RUNNING and starting == {t.id}
    assert started.token_id == t.id and started.placement == "a"
    assert (anchors, due, commits) == ([], [], [])


def test_a_window_from_the_first_arrival_is_anchored_once_in_the_view() -> None:
    part, _, _ = arming()
    settings = NodeSettings(timeout=5 * MINUTE, timeout_anchor=TimeoutAnchor.NODE)
    anchors, _ = part.arm(token(), "a", settings, T0)
    assert [a.at for a in anchors] == [T0]
    assert part.view.anchors == {("a", None): T0}
    again, _ = part.arm(token(), "a", settings, T0 + MINUTE)
    assert again == []


async def test_a_scatter_items_anchor_is_committed_on_its_first_arrival_only() -> None:
    part, commits, _ = arming()
    assert await part.item_anchor("a", "0") == T0
    assert await part.item_anchor("a", "0") == T0
    assert len(commits) == 1 and commits[0].anchors[0].item == "0"
