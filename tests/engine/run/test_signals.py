"""Signals through a stand-in for the executor, without an engine: a signal with an output moves
its parked token (claimed, its park closed, its payload merged), one without an output wakes
the node, and one the run's end beat is refused with the park closed as cancelled."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext, SignalRefused
from flowtide.engine.flows.plan import FlowPlan
from flowtide.store.base import Expect, ParkRecord, ParkStatus, TokenRecord, TokenStatus
from tests.engine.run.stand_in import RecordedRun

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@node(outputs=["approved", "rejected"], register=False)
def ask(ctx: NodeContext) -> str:
    return "approved"


def parked() -> tuple[RecordedRun, TokenRecord, ParkRecord]:
    """A run whose token waits parked at ``ask`` for a signal."""
    b = FlowBuilder("urn:test:flow:signals")
    b.task("ask", ask, {"approved": "end", "rejected": "end"})
    b.terminal("end")
    ex = RecordedRun(FlowPlan.build(b.build(), lambda ref: None), {"ask": ask}, T0)
    ex.host.executes = True
    t = ex.token("ask", S.PARKED)
    t.epoch = 1
    park = ParkRecord("p1", "r", t.id, "ask", t.visit, t.epoch, T0, key="approve")
    ex.view.parks[t.id] = park
    return ex, t, park


async def test_a_signal_with_an_output_moves_the_token_with_its_payload() -> None:
    ex, t, park = parked()
    answer = await ex.signals.signal(
        park, payload={"ok": True}, output="approved", idempotency_key="k1"
    )
    assert t.status is S.READY  # claimed
    assert ex.closed_parks == [(t.id, ParkStatus.SIGNALLED)]
    assert ex.committer.expect[t.id] == Expect(S.PARKED, 1, alive_at=T0)
    (move,) = ex.moves
    assert move.output == "approved" and [a.key for a in move.answers] == ["k1"]
    assert ex.view.state == {"ok": True}  # (merged by the move's update)
    assert answer == move.answers[0].answer


async def test_a_signal_without_an_output_wakes_the_node_in_one_commit() -> None:
    ex, t, park = parked()
    await ex.signals.signal(park, payload={"n": 2}, output=None, idempotency_key=None)
    (woken,) = ex.commits
    assert woken.tokens == [t] and t.epoch == 2
    assert woken.due_dropped == [(t.id, "timeout")]
    assert [e.kind for e in woken.events] == ["signalled", "node_started"]
    assert t.id in ex.prestarted and ex.spawned == [t.id]
    assert ex.view.state == {"n": 2}


async def test_a_signal_the_runs_end_beat_is_refused_and_its_park_closed() -> None:
    ex, t, park = parked()
    ex.refusing = True  # (the run ended first: every commit is skipped)
    with pytest.raises(SignalRefused):
        await ex.signals.signal(park, payload={}, output=None, idempotency_key=None)
    assert t.id not in ex.committer.expect and ex.spawned == []
    (closed,) = ex.committer.closing_parks
    assert closed.status is ParkStatus.CANCELLED and closed.closed_by == "run_ended"
