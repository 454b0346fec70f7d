"""A run's end through a stand-in for the executor, without an engine: the root scope's
cancellation says how the run ends, its end cancels its leftover tokens and answers its cancel
requests in the commit of its result, and it is folded into a step only when that step ends the
last token."""

from __future__ import annotations

from datetime import UTC, datetime

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.view import RunEnd
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.placements import Terminal
from flowtide.store.base import Commit, ParkRecord, ParkStatus, TokenStatus
from tests.engine.run.stand_in import DrivenRun, one_task_run

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run() -> DrivenRun:
    return one_task_run("urn:test:flow:ending", T0)


def test_the_run_deadline_times_the_run_out_where_its_tokens_are() -> None:
    ex = run()
    ex.token("ask", S.PARKED)
    ex.root.cancel(CancelReason.RUN_DEADLINE, T0)
    assert ex.root.cancellation is not None
    ex.ending.on_root_cancelled(ex.root.cancellation)
    assert ex.view.end is not None and ex.view.end.lifecycle is Lifecycle.TIMED_OUT
    assert ex.view.end.interrupted is not None
    assert ex.view.end.interrupted.reason == "timeout"
    assert ex.view.end.interrupted.node == "ask"
    assert not ex.ending.cancel("too late")  # (the run has ended)


async def test_the_end_cancels_leftovers_and_answers_cancel_requests() -> None:
    ex = run()
    t = ex.token("ask", S.PARKED)
    ex.view.parks[t.id] = ParkRecord("p1", "r", t.id, "ask", t.visit, 0, T0)
    ex.cancels.append("q1")
    ex.view.end = RunEnd(Lifecycle.CANCELLED, [], None)
    await ex.ending.finalize()
    # (Nothing comes between: the leftovers are cancelled by the end's own commit.)
    (end,) = ex.commits
    assert end.tokens == [t] and t.status is S.CANCELLED and t.epoch == 1
    assert [e.kind for e in end.events] == ["token_cancelled", "run_finished"]
    assert ex.closed_parks == [(t.id, ParkStatus.CANCELLED)]
    assert end.release and end.run is ex.view.run and ex.view.run.lifecycle == "cancelled"
    assert [(a.request_id, a.answer) for a in end.requests_answered] == [
        ("q1", {"cancelled": True})
    ]
    assert ex.recording.said() == ["forget", "ended"]


async def test_the_end_is_folded_into_a_step_only_when_it_ends_the_last_token() -> None:
    ex = run()
    last, other = ex.token("ask"), ex.token("ask")
    end = ex.plan.placements["end"]
    assert isinstance(end, Terminal)
    c = Commit("r", tokens=[last])
    assert ex.ending.closing(c, [(last, end)], [], None) is None  # (another token goes on)
    ex.view.tokens.pop(other.id)
    assert ex.ending.closing(c, [(last, end)], [], None) is not None
    ex.cancels.append("q1")  # (a cancel request is answered by the end's own step)
    assert ex.ending.closing(c, [(last, end)], [], None) is None
