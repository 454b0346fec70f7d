"""What a move comes to, decided without an engine: where an output goes, which moved tokens
end at once, and which start their next attempt in the move's own commit."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.joins import JoinGroups, expect_branches
from flowtide.engine.run.routing import ending, starting, targets_of
from flowtide.store.base import TokenRecord, TokenStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPLIT = "r.1/fork#1"


@node(outputs=["go"], register=False)
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done", "stop", "fail"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def plan() -> FlowPlan:
    b = FlowBuilder("urn:test:flow:routing")
    b.task("fork", fork, {"go": ["a", "b"]})
    b.task("a", step, {"done": "j", "stop": "end", "fail": "broken"})
    b.task("b", step, {"done": "j", "stop": "end", "fail": "broken"})
    b.join("j", "all", {"success": "end"})
    b.terminal("end")
    b.terminal("broken", outcome="failed")
    return FlowPlan.build(b.build(), lambda ref: None)


def token(n: int, at: str, lineage: tuple[tuple[str, int, int], ...] = ()) -> TokenRecord:
    return TokenRecord(
        id=f"r.{n}",
        run_id="r",
        placement=at,
        status=TokenStatus.READY,
        visit=1,
        lineage=lineage,
        created_at=T0,
    )


def test_an_output_goes_where_its_route_says_or_nowhere() -> None:
    p = plan()
    assert list(targets_of(p.placements["fork"], "go")) == ["a", "b"]
    assert not targets_of(p.placements["a"], "elsewhere")


def test_a_token_at_a_terminal_that_does_not_fail_ends_with_its_move() -> None:
    p = plan()
    done, failed, on = token(2, "end"), token(3, "broken"), token(4, "a")
    assert [(t.id, q.id) for t, q in ending(p, {}, [done, failed, on])] == [("r.2", "end")]


def test_no_token_ends_with_its_move_while_a_join_may_count_it() -> None:
    p = plan()
    groups: JoinGroups = {}
    expect_branches(groups, p, SPLIT, 2, (), ["a", "b"])
    assert ending(p, groups, [token(2, "end")]) == []


def test_a_move_starts_the_next_attempt_of_tokens_no_open_join_can_act_on() -> None:
    p = plan()
    groups: JoinGroups = {}
    expect_branches(groups, p, SPLIT, 2, (), ["a", "b"])
    a = token(2, "a", ((SPLIT, 0, 2),))
    b = token(3, "b", ((SPLIT, 1, 2),))
    outside = token(4, "a")
    at_join = token(5, "j", ((SPLIT, 0, 2),))
    # The split that made them opened the groups: they start with the move.
    assert starting(p, groups, [a, b, at_join], SPLIT) == [a, b]
    # A later move within the split: the open group may still act on it.
    assert starting(p, groups, [a, outside], None) == [outside]
