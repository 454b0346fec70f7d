"""A run's view rebuilt from its stored record, history and tokens, without an engine."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.marks import mark_side
from flowtide.engine.run.restoring import restore_view
from flowtide.engine.run.view import RunView
from flowtide.store.base import Checkpoint, EventRecord, RunRecord, TokenRecord, TokenStatus

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPLIT = "r.1/fork#1"


@node(outputs=["go"], register=False)
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done", "remind"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def plan() -> FlowPlan:
    b = FlowBuilder("urn:test:flow:restoring")
    b.task("fork", fork, {"go": ["a", "b"]})
    b.task("a", step, {"done": "j", "remind": "side-end"})
    b.task("b", step, {"done": "j", "remind": "side-end"})
    b.join("j", "all", {"success": "end"})
    b.terminal("end")
    b.terminal("side-end", outcome="reminded")
    return FlowPlan.build(b.build(), lambda ref: None)


def token(n: int, at: str, status: TokenStatus, branch: int | None = None) -> TokenRecord:
    lineage = ((SPLIT, branch, 2),) if branch is not None else ()
    return TokenRecord(
        id=f"r.{n}",
        run_id="r",
        placement=at,
        status=status,
        visit=1,
        lineage=lineage,
        created_at=T0,
    )


def event(seq: int, kind: str, at: str, token_id: str, **data: object) -> EventRecord:
    return EventRecord(kind, "r", T0, placement=at, token_id=token_id, data=dict(data), seq=seq)


def test_a_view_is_rebuilt_from_its_checkpoint_history_and_tokens() -> None:
    run = RunRecord(
        "r", "urn:f", "1", "parked", T0, checkpoint=Checkpoint(4, {"fork": 1}, [], None)
    )
    view = RunView(run, {})
    reminder = token(7, "side-end", S.DONE)
    mark_side(reminder)
    tokens = [
        token(1, "fork", S.DONE),
        token(2, "j", S.ARRIVED, 0),
        token(3, "b", S.PARKED, 1),
        reminder,
    ]
    history = [
        event(5, "node_started", "b", "r.3", visit=2),
        event(6, "terminal_reached", "side-end", "r.7", outcome="reminded"),
    ]
    restored = restore_view(view, plan(), tokens, history)
    assert (restored.seq, restored.next_id) == (6, 8)
    assert list(view.tokens) == ["r.2", "r.3"]
    assert view.visits == {"fork": 1, "b": 2, "j": 1}
    # A reminder's terminal is listed but sets no outcome.
    assert (view.terminals, view.outcome) == (["side-end"], None)
    group = view.joins[("j", SPLIT)]
    assert [t.id for t in group.arrived] == ["r.2"] and group.branches == {0}


def test_without_history_the_checkpoint_says_it_all() -> None:
    run = RunRecord("r", "urn:f", "1", "parked", T0, checkpoint=Checkpoint(9, {}, ["end"], "ok"))
    view = RunView(run, {})
    restored = restore_view(view, plan(), [], [])
    assert (restored.seq, restored.next_id, view.terminals, view.outcome) == (9, 1, ["end"], "ok")
