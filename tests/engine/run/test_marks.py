"""What a token carries between steps: written and read through one typed module, as JSON the
store keeps."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from flowtide.engine.run.marks import (
    FiredTimer,
    Waiting,
    arm_timers,
    armed_timers,
    carries_marks,
    drop_signal,
    fired_timers,
    inherit,
    interrupt,
    interrupted,
    is_due,
    last_backoff,
    leave,
    mark_due,
    mark_side,
    sets_outcome,
    signal_of,
    take_due,
    take_interrupt,
    timer_armed,
    timer_fired,
    wait_for,
    waiting_for,
    wake,
)
from flowtide.store.base import TokenRecord, TokenStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def token() -> TokenRecord:
    return TokenRecord(
        id="r.1", run_id="r", placement="a", status=TokenStatus.READY, visit=1, created_at=T0
    )


def stored(t: TokenRecord) -> TokenRecord:
    """``t`` as read back from a store (its data through JSON)."""
    t.data = json.loads(json.dumps(t.data))
    return t


def test_a_retry_waits_out_its_backoff_then_is_due() -> None:
    t = token()
    assert not carries_marks(t) and waiting_for(t) is None and last_backoff(t) is None
    wait_for(t, Waiting.RETRY, timedelta(seconds=1.5))
    t = stored(t)
    assert waiting_for(t) is Waiting.RETRY and last_backoff(t) == timedelta(seconds=1.5)
    mark_due(t)
    assert is_due(t, Waiting.RETRY) and not is_due(t, Waiting.WAIT)
    assert take_due(t) is Waiting.RETRY and take_due(t) is None


def test_a_wait_is_due_as_a_wait_by_default() -> None:
    t = token()
    mark_due(t)
    assert is_due(t, Waiting.WAIT)
    wait_for(t, Waiting.WAIT)
    assert (
        waiting_for(t) is Waiting.WAIT and last_backoff(t) is None and not is_due(t, Waiting.WAIT)
    )


def test_a_side_branch_keeps_its_mark_through_waits_moves_and_splits() -> None:
    t = token()
    assert sets_outcome(t)
    mark_side(t)
    wait_for(t, Waiting.WAIT)
    leave(t)
    assert not sets_outcome(stored(t))
    child = token()
    inherit(child, t)
    assert not sets_outcome(child)


def test_a_signal_wakes_a_token_keeping_the_timers_fired_this_visit() -> None:
    t = token()
    arm_timers(t, {0: T0, 1: T0 + timedelta(hours=1)})
    timer_fired(t, 0)
    assert list(armed_timers(t)) == ["1"] and fired_timers(t) == [0]
    assert timer_armed(t, 1) and not timer_armed(t, 0)
    wake(t, {"ok": True})
    t = stored(t)
    assert signal_of(t) == {"ok": True} and fired_timers(t) == [0] and armed_timers(t) == {}
    drop_signal(t)
    assert signal_of(t) is None


def test_an_interrupting_timer_is_kept_until_its_node_stops() -> None:
    t = token()
    assert take_interrupt(t) is None
    fired = FiredTimer("escalate", 2, "park")
    interrupt(t, fired)
    t = stored(t)
    assert interrupted(t)
    assert take_interrupt(t) == fired and not interrupted(t)
