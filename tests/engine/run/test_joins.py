"""Join decisions on a run's groups and live tokens, without an engine: arrivals, a join that
fires success, error or empty, whom a first join cancels, and groups rebuilt from stored tokens."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.joins import (
    JoinGroups,
    arrive,
    close_split,
    expect_branches,
    judges_move,
    losers,
    next_firing,
    note_moves,
    open_splits,
    out_of_reach,
    restore_groups,
)
from flowtide.store.base import TokenRecord, TokenStatus

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPLIT = "r.1/fork#1"


@node(outputs=["go"], register=False)
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done", "skip"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def plan(mode: str = "all", *, empty: bool = True, quorum: int | None = None) -> FlowPlan:
    """fork -> a, b, c -> j (``skip`` goes around the join to the end)."""
    b = FlowBuilder(f"urn:test:flow:joins-{mode}")
    b.task("fork", fork, {"go": ["a", "b", "c"]})
    for name in "abc":
        b.task(name, step, {"done": "j", "skip": "end"})
    routes = {"success": "end", "error": "end"}
    if empty:
        routes["empty"] = "end"
    b.join("j", mode, routes, quorum=quorum)
    b.terminal("end")
    return FlowPlan.build(b.build(), lambda ref: None)


def branch(i: int, at: str, status: TokenStatus = S.READY) -> TokenRecord:
    return TokenRecord(
        id=f"r.{i + 2}",
        run_id="r",
        placement=at,
        status=status,
        visit=1,
        lineage=((SPLIT, i, 3),),
        created_at=T0,
    )


def split(p: FlowPlan) -> tuple[JoinGroups, dict[str, TokenRecord]]:
    groups: JoinGroups = {}
    expect_branches(groups, p, SPLIT, 3, (), ["a", "b", "c"])
    live = {t.id: t for t in (branch(0, "a"), branch(1, "b"), branch(2, "c"))}
    return groups, live


def test_a_split_opens_a_clean_group_at_the_join_its_branches_reach() -> None:
    groups, _ = split(plan())
    assert list(groups) == [("j", SPLIT)]
    group = groups[("j", SPLIT)]
    assert (group.count, group.dirty, group.arrived) == (3, False, [])


def test_an_all_join_fires_success_once_every_branch_arrived() -> None:
    p = plan()
    groups, live = split(p)
    for t in list(live.values())[:2]:
        payload = arrive(groups, t, "j")
        assert t.status is S.ARRIVED and payload.split == SPLIT
    assert next_firing(groups, p, live) is None
    arrive(groups, live["r.4"], "j")
    firing = next_firing(groups, p, live)
    assert firing is not None and (firing.output, firing.join.id) == ("success", "j")
    assert groups == {}  # (taken out: it fires once)
    assert losers(firing, live) == []


def test_a_branch_that_goes_elsewhere_makes_an_all_join_fire_error() -> None:
    p = plan()
    groups, live = split(p)
    arrive(groups, live["r.2"], "j")
    arrive(groups, live["r.3"], "j")
    gone = live.pop("r.4")
    gone.placement = "end"
    assert note_moves(groups, p, [gone], ended=True)
    firing = next_firing(groups, p, live)
    assert firing is not None and firing.output == "error"


def test_a_move_that_can_still_reach_the_join_marks_nothing() -> None:
    p = plan()
    groups, live = split(p)
    assert not note_moves(groups, p, [live["r.2"]])
    assert not groups[("j", SPLIT)].dirty


def test_a_join_no_branch_reached_fires_empty_only_where_empty_routes() -> None:
    for routed in (True, False):
        p = plan(empty=routed)
        groups, live = split(p)
        for t in list(live.values()):
            t.placement = "end"
        live.clear()
        assert note_moves(groups, p, [branch(0, "end")], ended=True)
        firing = next_firing(groups, p, live)
        assert (firing.output if firing else None) == ("empty" if routed else None)
        assert groups == {}


def test_a_first_join_cancels_the_branches_that_did_not_arrive() -> None:
    p = plan("first")
    groups, live = split(p)
    arrive(groups, live["r.3"], "j")
    firing = next_firing(groups, p, live)
    assert firing is not None and firing.output == "success"
    assert [t.id for t in losers(firing, live)] == ["r.2", "r.4"]


def test_a_quorum_join_fires_at_its_quorum() -> None:
    p = plan("quorum", quorum=2)
    groups, live = split(p)
    arrive(groups, live["r.2"], "j")
    assert next_firing(groups, p, live) is None
    arrive(groups, live["r.4"], "j")
    firing = next_firing(groups, p, live)
    assert firing is not None and [t.id for t in losers(firing, live)] == ["r.3"]


def test_a_joined_split_drops_its_other_groups_that_nothing_arrived_at() -> None:
    p = plan()
    groups, live = split(p)
    groups[("k", SPLIT)] = type(groups[("j", SPLIT)])("k", SPLIT, 3)
    arrive(groups, live["r.2"], "j")
    close_split(groups, SPLIT)
    assert list(groups) == [("j", SPLIT)]


def test_a_move_is_judged_unless_only_its_own_fresh_groups_are_open() -> None:
    p = plan()
    groups, live = split(p)
    assert not judges_move({}, p, ["a"], None)
    assert judges_move(groups, p, ["end"], None)
    assert not judges_move(groups, p, ["a", "b", "c"], SPLIT)
    assert open_splits(groups, SPLIT) == set()
    assert open_splits(groups, None) == {SPLIT}
    assert not out_of_reach(live["r.2"], {SPLIT})
    assert out_of_reach(live["r.2"], set())


def test_groups_are_rebuilt_from_stored_tokens() -> None:
    p = plan()
    _, live = split(p)
    live["r.2"].placement, live["r.2"].status = "j", S.ARRIVED
    groups: JoinGroups = {}
    restore_groups(groups, p, live.values())
    group = groups[("j", SPLIT)]
    assert [t.id for t in group.arrived] == ["r.2"] and group.branches == {0}
    assert (group.count, group.lineage) == (3, ())
