"""Parking decisions without an engine: whether a due entry still moves its token, and which
parked token a signal moves or why it is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext, SignalRefused
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.due import DEADLINE, RESUME, SIGNAL, TIMEOUT, DuePurpose
from flowtide.engine.run.marks import Waiting, arm_timers, wait_for
from flowtide.engine.run.parking import due_applies, park_record, signalled_token
from flowtide.store.base import ParkRecord, ParkStatus, StoreConflict, TokenRecord, TokenStatus

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


@node(outputs=["approved", "rejected"], register=False)
def ask(ctx: NodeContext) -> str:
    return "approved"


def plan() -> FlowPlan:
    b = FlowBuilder("urn:test:flow:parking")
    b.task("ask", ask, {"approved": "end", "rejected": "end"})
    b.terminal("end")
    return FlowPlan.build(b.build(), lambda ref: None)


def token(status: TokenStatus, **fields: object) -> TokenRecord:
    t = TokenRecord(id="r.1", run_id="r", placement="ask", status=status, visit=2, created_at=T0)
    for name, value in fields.items():
        setattr(t, name, value)
    return t


def test_a_wait_is_resumed_at_its_instant_and_not_before() -> None:
    waiting = token(S.WAITING, due=T0 + SECOND)
    assert due_applies(waiting, RESUME, T0 + SECOND)
    assert not due_applies(waiting, RESUME, T0)  # (it waits again, for a later instant)
    assert not due_applies(token(S.READY), RESUME, T0)


def test_a_timeout_moves_a_parked_token_or_a_backoff_past_its_window() -> None:
    parked = token(S.PARKED, deadline=T0)
    assert due_applies(parked, TIMEOUT, T0) and due_applies(parked, TIMEOUT, T0 + SECOND)
    assert not due_applies(parked, TIMEOUT, T0 - SECOND)
    backoff = token(S.WAITING, deadline=T0)
    assert not due_applies(backoff, TIMEOUT, T0)
    wait_for(backoff, Waiting.RETRY, SECOND)
    assert due_applies(backoff, TIMEOUT, T0)
    assert not due_applies(token(S.RUNNING, deadline=T0), TIMEOUT, T0)


def test_a_timer_moves_its_visit_of_the_token_while_it_is_armed() -> None:
    t = token(S.PARKED)
    arm_timers(t, {0: T0})
    assert due_applies(t, DuePurpose.timer(2, 0), T0)
    assert not due_applies(t, DuePurpose.timer(1, 0), T0)  # (an earlier visit's)
    assert not due_applies(t, DuePurpose.timer(2, 1), T0)  # (not armed)
    t.status = S.READY
    assert not due_applies(t, DuePurpose.timer(2, 0), T0)


def test_purposes_that_are_the_runs_or_unknown_move_no_token() -> None:
    t = token(S.WAITING)
    for purpose in (SIGNAL, DEADLINE, None):
        assert not due_applies(t, purpose, T0)


def park(epoch: int = 3, status: ParkStatus = ParkStatus.PARKED) -> ParkRecord:
    return ParkRecord(f"r.1#{epoch}", "r", "r.1", "ask", 2, epoch, T0, status=status)


def test_a_signal_moves_the_token_parked_there() -> None:
    t = token(S.PARKED, deadline=T0 + SECOND)
    p = park()
    found = signalled_token(plan(), {t.id: t}, {t.id: p}, {}, p, "approved", T0)
    assert found is t


def test_a_signal_is_refused_after_the_deadline_or_with_an_output_the_node_lacks() -> None:
    t = token(S.PARKED, deadline=T0)
    p = park()
    with pytest.raises(SignalRefused):
        signalled_token(plan(), {t.id: t}, {t.id: p}, {}, p, None, T0)
    t.deadline = None
    with pytest.raises(SignalRefused):
        signalled_token(plan(), {t.id: t}, {t.id: p}, {}, p, "maybe", T0)


def test_a_signal_for_a_closed_park_is_refused_and_one_never_seen_looks_again() -> None:
    t = token(S.READY)
    closed = park(status=ParkStatus.SIGNALLED)
    recent = {closed.id: closed}
    assert park_record({}, recent, closed.id) is closed
    with pytest.raises(SignalRefused):
        signalled_token(plan(), {t.id: t}, {}, recent, closed, None, T0)
    with pytest.raises(StoreConflict):
        signalled_token(plan(), {t.id: t}, {}, {}, park(epoch=9), None, T0)
