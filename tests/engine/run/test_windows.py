"""Windows, timers and node anchors decided without an engine: what a token's window and timers
are, where a fixed window ends, and which anchors a move releases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.due import DuePurpose, parse_purpose
from flowtide.engine.run.marks import armed_timers, timer_fired, window_of
from flowtide.engine.run.windows import UNARMED, Anchors, arm, fixed_window_end, releases
from flowtide.model.settings import NodeSettings, TimeoutAnchor, Timer
from flowtide.store.base import TokenRecord, TokenStatus

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
NOW = CREATED + timedelta(minutes=10)
MINUTE = timedelta(minutes=1)


@node(outputs=["again", "done", "timeout"], register=False)
def poll(ctx: NodeContext) -> str:
    return "done"


def token(at: str = "poll", status: TokenStatus = TokenStatus.RUNNING) -> TokenRecord:
    return TokenRecord(
        id=f"r.{at}", run_id="r", placement=at, status=status, visit=2, created_at=CREATED
    )


def test_a_placement_without_window_or_timers_arms_nothing() -> None:
    t = token()
    armed = arm(t, "poll", NodeSettings(), now=NOW, run_created_at=CREATED, anchors={})
    assert armed is UNARMED
    armed.apply(t)
    assert t.deadline is None and t.data == {}


def test_a_window_anchored_at_the_first_arrival_stores_that_arrival_once() -> None:
    settings = NodeSettings(timeout=5 * MINUTE, timeout_anchor=TimeoutAnchor.NODE)
    first = arm(token(), "poll", settings, now=NOW, run_created_at=CREATED, anchors={})
    assert first.anchor is not None and first.anchor.at == NOW
    assert first.deadline == NOW + 5 * MINUTE
    later = arm(
        token(),
        "poll",
        settings,
        now=NOW + MINUTE,
        run_created_at=CREATED,
        anchors={("poll", None): NOW},
    )
    assert later.anchor is None and later.deadline == NOW + 5 * MINUTE
    t = token()
    later.apply(t)
    assert t.deadline == NOW + 5 * MINUTE and window_of(t)["anchor"] == "node"


def test_timers_fired_this_visit_are_not_armed_again() -> None:
    settings = NodeSettings(
        timers=(Timer(after=MINUTE, output="again"), Timer(after=2 * MINUTE, output="again"))
    )
    t = token()
    timer_fired(t, 0)
    armed = arm(t, "poll", settings, now=NOW, run_created_at=CREATED, anchors={})
    assert armed.deadline is None and armed.window is None
    assert [(e.when, parse_purpose(e.purpose)) for e in armed.due] == [
        (NOW + 2 * MINUTE, DuePurpose.timer(2, 1))
    ]
    armed.apply(t)
    assert list(armed_timers(t)) == ["1"]


def test_a_window_fixed_at_the_run_start_ends_there_and_a_park_window_moves() -> None:
    fixed = NodeSettings(timeout=30 * MINUTE, timeout_anchor=TimeoutAnchor.INSTANCE)
    assert (
        fixed_window_end("poll", fixed, now=NOW, run_created_at=CREATED, anchors={})
        == CREATED + 30 * MINUTE
    )
    moving = NodeSettings(timeout=30 * MINUTE)
    assert fixed_window_end("poll", moving, now=NOW, run_created_at=CREATED, anchors={}) is None


def plan() -> FlowPlan:
    """start -> poll (again: back to poll; done: after; timeout: after) -> end."""
    b = FlowBuilder("urn:test:flow:windows")
    b.task("start", poll, {"again": "poll", "done": "poll", "timeout": "poll"})
    b.task(
        "poll",
        poll,
        {"again": "poll", "done": "after", "timeout": "after"},
        release_on=["done"],
    )
    b.task("after", poll, {"again": "end", "done": "end", "timeout": "end"})
    b.terminal("end")
    return FlowPlan.build(b.build(), lambda ref: None)


def test_a_move_releases_an_anchor_it_names_or_whose_loop_it_leaves() -> None:
    p = plan()
    here = p.placements["poll"]
    t = token()
    anchors: Anchors = {("poll", None): NOW}
    assert releases(p, anchors, [t], t, here, "done", ["after"]) == [("poll", None)]
    assert releases(p, anchors, [t], t, here, "timeout", ["after"]) == [("poll", None)]
    assert releases(p, anchors, [t], t, here, "again", ["poll"]) == []
    # Another live token still in the anchored loop holds the anchor.
    other = token("poll")
    other.id = "r.2"
    start = p.placements["start"]
    assert releases(p, anchors, [t, other], t, start, "again", ["after"]) == []
