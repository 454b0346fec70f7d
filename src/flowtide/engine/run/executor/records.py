"""Records of a run's progress that the executor and its parts build: ends, token moves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import (
    NodeTimedOut,
    RunFinished,
    TerminalReached,
    TimerFired,
)
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.result import ErrorInfo, InterruptedAt, RunResult, run_result
from flowtide.engine.run.marks import FiredTimer, leave
from flowtide.engine.run.view import RunEnd
from flowtide.model.placements import (
    Terminal,
)
from flowtide.store.base import (
    EventRecord,
    RunRecord,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


def timed_out(
    budget: timedelta, deadline: datetime | None, routed: bool, to: list[str] | None = None
) -> NodeTimedOut:
    """The payload of a ``node_timed_out`` event (``to``: where the token moved by it)."""
    return NodeTimedOut(
        budget=budget.total_seconds(),
        deadline=isoformat(deadline) if deadline is not None else None,
        routed=routed,
        to=to,
    )


def escalation(timer: FiredTimer, interrupting: bool, to: list[str] | None = None) -> TimerFired:
    """The payload of an escalation timer's ``timer_fired`` (``to``: where its token, or its
    new tokens, went)."""
    return TimerFired(
        purpose="timer",
        output=timer.output,
        index=timer.index,
        anchor=timer.anchor,
        interrupting=interrupting,
        to=to,
    )


def move_token(token: TokenRecord, target: str, visit: int) -> None:
    """``token`` leaves its placement for ``target`` (a single target): a fresh attempt there."""
    token.epoch += 1
    token.placement = target
    token.visit = visit
    token.attempt = 1
    token.status = S.READY
    token.deadline = None
    token.due = None
    leave(token)


def terminal_event(run_id: str, at: datetime, token: TokenRecord, q: Terminal) -> EventRecord:
    """``terminal_reached`` for ``token``, which has moved to ``q``."""
    return event_record(
        TerminalReached(outcome=q.outcome),
        run_id,
        at,
        placement=q.id,
        attempt=token.attempt,
        token_id=token.id,
    )


def end_result(
    run_id: str,
    lifecycle: Lifecycle,
    state: dict[str, Any],
    terminals: Sequence[str],
    outcome: str | None,
    *,
    errors: Sequence[ErrorInfo] = (),
    interrupted: InterruptedAt | None = None,
    warnings: Sequence[str] = (),
) -> RunResult:
    """A run's result at its end (``outcome``: of the first terminal its own branches reached,
    if any: not a reminder's, see :data:`SIDE`)."""
    if lifecycle is not Lifecycle.COMPLETED:
        failed = lifecycle is Lifecycle.FAILED and terminals and outcome is None
        outcome = "failed" if failed else None
    return run_result(
        run_id,
        lifecycle,
        outcome,
        state,
        tuple(errors),
        interrupted,
        (),
        tuple(warnings),
        tuple(terminals),
    )


def finish(run: RunRecord, result: RunResult, now: datetime) -> EventRecord:
    """Record ``result`` on ``run`` (lifecycle, end instant, outcome, result) and return the
    ``run_finished`` event."""
    if run.lifecycle == Lifecycle.PARKED and result.lifecycle is Lifecycle.COMPLETED:
        # A run rebuilt while parked whose last move ended it (a crash between the move and
        # its end, say): it ran that move.
        run.lifecycle = Lifecycle.RUNNING.value
    run.lifecycle = transition(run.lifecycle, result.lifecycle).value
    run.finished_at = now
    run.outcome = result.outcome
    run.result = result.to_dict()
    return event_record(
        RunFinished(
            lifecycle=result.lifecycle.value,
            outcome=result.outcome,
            errors=[e.to_dict() for e in result.errors],
            sender=result.interrupted_at.sender if result.interrupted_at else None,
        ),
        run.id,
        now,
    )


def end_reason(end: RunEnd) -> str:
    if end.lifecycle is Lifecycle.CANCELLED:
        return "run_cancelled"
    if end.lifecycle is Lifecycle.TIMED_OUT:
        return "run_deadline"
    return "run_ended"
