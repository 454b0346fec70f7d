"""The executor's join groups through a stand-in for the executor: a token of no split passes,
an arrival commits, a first join fires once and cancels its losers (their running code too);
without an engine."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.attempts import Running
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.joins import expect_branches
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.view import RunView
from flowtide.engine.timing.scope import CancelReason, CancelScope
from flowtide.model.placements import Join
from flowtide.store.base import (
    ParkStatus,
    RunRecord,
    TokenRecord,
    TokenStatus,
)
from tests.engine.run.stand_in import RecordedSteps

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SPLIT = "r.1/fork#1"


@node(outputs=["go"], register=False)
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done"], register=False)
def step(ctx: NodeContext) -> str:
    return "done"


def flow_plan(mode: str) -> FlowPlan:
    """fork -> a, b, c -> j -> end."""
    b = FlowBuilder(f"urn:test:flow:join-firings-{mode}")
    b.task("fork", fork, {"go": ["a", "b", "c"]})
    for name in "abc":
        b.task(name, step, {"done": "j"})
    b.join("j", mode, {"success": "end", "error": "end", "empty": "end"})
    b.terminal("end")
    return FlowPlan.build(b.build(), lambda ref: None)


class Ex(RecordedSteps):
    """The executor's operations join groups call, recorded."""

    def __init__(self, mode: str = "first") -> None:
        super().__init__(RunView(RunRecord("r", "f", "1", "running", T0), {}), T0)
        self.plan = flow_plan(mode)
        self.running: Running = {}
        self.moves: list[tuple[str, str, list[str]]] = []
        self.spawned: list[str] = []
        self.closed: list[str] = []

    def new_token(self, placement: str, lineage: tuple[tuple[str, int, int], ...]) -> TokenRecord:
        t = TokenRecord("r.new", "r", placement, S.READY, visit=1, lineage=lineage, created_at=T0)
        self.view.tokens[t.id] = t
        return t

    def spawn(self, token: TokenRecord) -> None:
        self.spawned.append(token.id)

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None:
        self.closed.append(token.id)

    async def move(self, m: Move) -> Moved:
        self.moves.append((m.token.id, m.output, [t.id for t in m.extra]))
        return Moved(True, m.token)


def branches(ex: Ex) -> list[TokenRecord]:
    expect_branches(ex.view.joins, ex.plan, SPLIT, 3, (), ["a", "b", "c"])
    out = []
    for i, at in enumerate("abc"):
        t = TokenRecord(
            f"r.{i + 2}", "r", at, S.READY, visit=1, lineage=((SPLIT, i, 3),), created_at=T0
        )
        ex.view.tokens[t.id] = t
        out.append(t)
    return out


JOIN = Join(id="j", mode="first", routes={"success": "end"})


async def test_a_token_of_no_split_passes_the_join_on_success() -> None:
    ex = Ex()
    t = TokenRecord("r.1", "r", "j", S.READY, visit=1, created_at=T0)
    assert await Joins(ex, ex).at_join(t, JOIN) is t
    assert ex.moves == [("r.1", "success", [])]
    assert ex.commits == []


async def test_a_first_join_fires_once_and_cancels_its_losers_and_their_code() -> None:
    ex = Ex()
    first, second, third = branches(ex)
    scope = CancelScope(None)
    ex.running[second.id] = ("b", scope)
    first.placement = "j"
    assert await Joins(ex, ex).at_join(first, JOIN) is None
    assert len(ex.commits) == 1  # (the arrival)
    assert ex.moves == [(first.id, "success", [second.id, third.id])]
    assert ex.spawned == [first.id]
    assert first.lineage == ()  # (it left the split)
    assert second.status is S.CANCELLED and third.status is S.CANCELLED
    assert second.id not in ex.view.tokens and third.id not in ex.view.tokens
    assert ex.closed == [second.id, third.id]
    assert scope.cancellation is not None
    assert scope.cancellation.reason is CancelReason.JOIN_LOSER


async def test_an_all_join_waits_for_every_branch() -> None:
    ex = Ex("all")
    tokens = branches(ex)
    joins = Joins(ex, ex)
    for t in tokens[:2]:
        t.placement = "j"
        await joins.at_join(t, JOIN)
    assert ex.moves == []
    tokens[2].placement = "j"
    await joins.at_join(tokens[2], JOIN)
    assert [m[1] for m in ex.moves] == ["success"]
