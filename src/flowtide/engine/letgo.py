"""Ending a let-go run in one commit, without rebuilding its executor.

The common resume: a run the engine let go of (lifecycle ``parked``, nothing of it in memory)
has exactly one live token, parked, and a signal's output (or the park's ``timeout`` output when
the sweeper fires its deadline) leads straight to a terminal that does not fail. The general path
rebuilds an executor for it (the run, its state, tokens, open parks and anchors, the history
tail), commits the move with the terminal, then ends the run in a task of its own with a second
commit. Here the same records are decided from the store's records and the flow's plan and
written in one compare-and-set commit: the ``signalled`` (or ``node_timed_out``) event,
``terminal_reached`` and ``run_finished`` in that order, at one instant; the park closed; the
token moved (and its due entries dropped); the state change; every node anchor of the run
released (what the move and the run's end release between them); the run deadline's due entry
dropped; the run record with its lifecycle, outcome and result; the idempotency answer. The
commit expects the token parked at the park's epoch (a signal: with its deadline still ahead),
exactly as the general path does, so a signal and a timeout that race (in this engine or
another on the same store) are still decided by the store.

A timeout that the placement does not route fails the run, also in one commit (the token
``failed``, ``node_timed_out`` and ``run_finished``), as the general path records it.

Anything else goes to the general path, which also gives every refusal: a hook is registered,
the run is in memory (or being rebuilt) here, it is a child run, it has no resume checkpoint or
history after it, its run deadline has passed, its flow has post phases or is not the version
the run started on, another token is live, the token is not parked at the park's epoch, its
deadline has passed (a signal), the signal has no output (the node runs again), the output is not
valid or does not lead to one terminal that does not fail, the timeout may be retried.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flowtide.engine.errors import NodeTimeoutError
from flowtide.engine.events import EventKind
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.plan import FlowPlan
from flowtide.engine.reducers import StateMerger
from flowtide.engine.result import ErrorInfo, InterruptedAt, RunResult
from flowtide.engine.run import (
    end_result,
    finish,
    invalid_output,
    move_token,
    signal_answer,
    signalled_data,
    terminal_event,
    timed_out_data,
)
from flowtide.model.placements import TIMEOUT_OUTPUT, AnyPlacement, Terminal
from flowtide.store.base import (
    LIVE_TOKEN_STATUSES,
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    ParkRecord,
    ParkStatus,
    RunRecord,
    SignalAnswer,
    Store,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

if TYPE_CHECKING:
    from flowtide.engine.engine import Engine

__all__ = ["WaitingRun", "end_by_signal", "end_by_timeout", "read_waiting_run"]

_PARKED = Lifecycle.PARKED.value
_RUNNING = Lifecycle.RUNNING.value
_SIGNALLED = EventKind.SIGNALLED.value


@dataclass(slots=True)
class WaitingRun:
    """A run read together with what ending it from one parked token needs
    (:func:`read_waiting_run`): the signal or deadline that ends a let-go run decides from this
    alone, then commits with ``Commit.expect`` on the token."""

    run: RunRecord
    park: ParkRecord | None
    """The token's open park (None: it has none)."""
    live: Sequence[TokenRecord]
    """The run's live tokens (``LIVE_TOKEN_STATUSES``), in creation order."""
    last_seq: int
    """The seq of the run's last event (its checkpoint's, when nothing followed it)."""
    state: dict[str, Any]
    """A copy of the run's state."""


async def read_waiting_run(store: Store, run_id: str, token_id: str) -> WaitingRun:
    """The run (raises ``UnknownRunError``), the open park of its token ``token_id``, its live
    tokens, the seq of its last event and a copy of its state, through the store's reads."""
    run = await store.get_run(run_id)
    parks = await store.parks(run_id=run_id, open_only=True)
    park = next((p for p in parks if p.token_id == token_id), None)
    live = await store.tokens(run_id, LIVE_TOKEN_STATUSES)
    after = run.checkpoint.seq if run.checkpoint is not None else 0
    events = await store.history(run_id, after=after)
    last_seq = events[-1].seq if events else after
    return WaitingRun(run, park, live, last_seq, await store.get_state(run_id))


@dataclass(slots=True)
class _LetGo:
    """A let-go run with one live token, parked at ``park``: what the one commit needs."""

    run: RunRecord
    plan: FlowPlan
    park: ParkRecord
    p: AnyPlacement
    token: TokenRecord | None = None


def _let_go(engine: Engine, run: RunRecord, park: ParkRecord, now: datetime) -> _LetGo | None:
    """The run and its plan, if the fast path may end it from ``park`` (the token is read by
    :func:`_parked_token`); None: take the general path."""
    if (
        engine.hooks
        or run.lifecycle != _PARKED
        or run.checkpoint is None
        or run.parent_run_id is not None
        or (run.deadline is not None and run.deadline <= now)
    ):
        return None
    plan = engine._known_plan(run.flow_id)
    if plan is None or plan.flow.version != run.flow_version or plan.post:
        return None
    if park.status is not ParkStatus.PARKED or park.placement not in plan.placements:
        return None
    return _LetGo(run, plan, park, plan.placements[park.placement])


def _parked_token(g: _LetGo, view: WaitingRun) -> TokenRecord | None:
    """The run's only live token, parked at the park's epoch, with no history after the
    checkpoint; None: take the general path."""
    run, park = g.run, g.park
    assert run.checkpoint is not None
    if len(view.live) != 1:
        return None
    token = view.live[0]
    if token.id != park.token_id or token.status is not TokenStatus.PARKED:
        return None
    if token.epoch != park.epoch:
        return None
    if view.last_seq > run.checkpoint.seq:
        return None  # events after the checkpoint (a warning, a failed hook): rebuild
    g.token = token
    return token


def _terminal(p: AnyPlacement, plan: FlowPlan, output: str) -> Terminal | None:
    """The terminal that does not fail ``output`` leads to alone, if it does."""
    targets = p.route_map().get(output)
    if targets is None or len(targets) != 1:
        return None
    q = plan.placements.get(targets[0])
    return q if isinstance(q, Terminal) and not q.fails else None


def _visit(run: RunRecord, placement: str) -> int:
    """The next visit of ``placement`` (the checkpoint's counters are current: no history)."""
    assert run.checkpoint is not None
    return run.checkpoint.visits.get(placement, 0) + 1


async def _end(
    engine: Engine,
    g: _LetGo,
    now: datetime,
    first: EventRecord,
    result: RunResult,
    expect: Expect,
    *,
    moved: Terminal | None,
    state: tuple[dict[str, Any], list[str]] = ({}, []),
    answers: list[SignalAnswer] | None = None,
) -> None:
    """Commit the run's end (``moved``: the terminal the token moved to, else it failed), then
    hand the result to whoever waits for it. Raises ``StoreConflict`` if the token moved."""
    run, token = g.run, g.token
    assert token is not None
    events = [first]
    if moved is not None:
        first.data["to"] = [moved.id]
        move_token(token, moved.id, _visit(run, moved.id))
        token.status = TokenStatus.DONE
        events.append(terminal_event(run.id, now, token, moved))
    else:
        token.status = TokenStatus.FAILED
    # parked (checked) -> running -> the end, as on the general path; only the end is stored.
    run.lifecycle = _RUNNING
    events.append(finish(run, result, now))
    # A token that failed keeps its other due entries, as on the general path.
    due_cleared = [token.id] if moved is not None else []
    if run.deadline is not None:
        due_cleared.append(run.id)
    anchors = (
        [(a.placement, a.item) for a in await engine.store.node_anchors(run.id)]
        if g.plan.anchored
        else []
    )
    written, removed = state
    # Every field by position (this is every let-go end; keywords cost twice as much), in
    # Commit's order: run id, run, tokens, state, state deleted, events, due, due cleared, due
    # dropped, anchors, anchors released, scatter, parks, signal answers, expect.
    await engine.store.commit(
        Commit(
            run.id,
            run,
            [token],
            written or None,
            removed,
            events,
            (),
            due_cleared,
            (),
            (),
            anchors,
            (),
            [g.park],
            answers or (),
            {token.id: expect},
        )
    )
    engine._ended(result)


def _terminals(run: RunRecord, q: Terminal | None) -> tuple[list[str], str | None]:
    """The terminals reached and the outcome once ``q`` (if any) is reached too."""
    assert run.checkpoint is not None
    terminals = list(run.checkpoint.terminals)
    outcome = run.checkpoint.outcome
    if q is not None:
        terminals.append(q.id)
        if outcome is None:
            outcome = q.outcome
    return terminals, outcome


async def end_by_signal(
    engine: Engine,
    park: ParkRecord,
    *,
    payload: dict[str, Any],
    output: str | None,
    idempotency_key: str | None,
) -> datetime | None:
    """Apply a signal with ``output`` to the let-go run that ``park`` (still open) belongs to
    and end it in one commit; returns the instant it was applied at (the receipt's), or None for
    the general path (nothing was written). Raises ``StoreConflict`` (``DuplicateSignal``) when
    the store refuses the commit."""
    if output is None:
        return None
    run_id = park.run_id
    if not engine._claim_end(run_id):
        return None
    try:
        now = engine.clock.now()
        view = await read_waiting_run(engine.store, park.run_id, park.token_id)
        if view.park is None or view.park.id != park.id:
            return None  # (closed since it was found: the general path says why)
        run, park = view.run, view.park
        g = _let_go(engine, run, park, now)
        if g is None:
            return None
        p = g.p
        plan = g.plan
        key = (p.id, output)
        if key in plan.signal_ends:
            q = plan.signal_ends[key]
        elif invalid_output(plan, p, output, park.token_id, park) is not None:
            return None  # (not remembered: any text may come as an output)
        else:
            q = plan.signal_ends[key] = _terminal(p, plan, output)
        if q is None:
            return None
        token = _parked_token(g, view)
        if token is None:
            return None
        if token.deadline is not None and token.deadline <= now:
            return None  # expired: the general path refuses it
        epoch = token.epoch
        first = EventRecord(
            _SIGNALLED,
            run.id,
            now,
            token.placement,
            token.attempt,
            token.id,
            signalled_data(park, output, payload, idempotency_key),
        )
        state = view.state
        change: tuple[dict[str, Any], list[str]] = ({}, [])
        if payload:
            change = StateMerger(g.plan.flow.reducers).apply(state, dict(state), {}, [], payload)
        _close(park, ParkStatus.SIGNALLED, now, "signal")
        terminals, outcome = _terminals(run, q)
        # (state is this signal's own copy: the result takes it.)
        result = end_result(run.id, Lifecycle.COMPLETED, state, terminals, outcome)
        answers = []
        if idempotency_key is not None:
            answer = signal_answer(park, output, now, idempotency_key)
            answers.append(SignalAnswer(idempotency_key, run.id, answer))
        await _end(
            engine,
            g,
            now,
            first,
            result,
            _parked_at(epoch, now),
            moved=q,
            state=change,
            answers=answers,
        )
        return now
    finally:
        engine._unclaim_end(run_id)


async def end_by_timeout(engine: Engine, view: WaitingRun, entry: DueEntry) -> bool:
    """Fire the park deadline ``entry`` of the let-go run in ``view`` (read for the entry's
    token) and end the run in one commit (the ``timeout`` output leads to a terminal, or is not
    routed and the run fails); False: the general path fires it (nothing was written). A token
    another engine moved first is left as it is."""
    if not engine._claim_end(view.run.id):
        return False
    try:
        return await _end_by_timeout(engine, view, entry)
    finally:
        engine._unclaim_end(view.run.id)


async def _end_by_timeout(engine: Engine, view: WaitingRun, entry: DueEntry) -> bool:
    now = engine.clock.now()
    run, park = view.run, view.park
    if park is None:
        return False
    g = _let_go(engine, run, park, now)
    if g is None:
        return False
    p = g.p
    settings = g.plan.settings[p.id]
    budget = settings.timeout
    if budget is None or (settings.retry is not None and settings.retry.retry_on):
        return False  # (a timeout that may be retried: the general path decides)
    routed = TIMEOUT_OUTPUT in p.route_map()
    q = _terminal(p, g.plan, TIMEOUT_OUTPUT) if routed else None
    if routed and q is None:
        return False
    token = _parked_token(g, view)
    if token is None:
        return False
    deadline = token.deadline
    if deadline is None or deadline > entry.when:
        return False
    first = EventRecord(
        EventKind.NODE_TIMED_OUT.value,
        run.id,
        now,
        token.placement,
        token.attempt,
        token.id,
        timed_out_data(budget, deadline, routed),
    )
    state = view.state
    _close(park, ParkStatus.TIMED_OUT, now, "timeout")
    terminals, outcome = _terminals(run, q)
    if q is not None:
        result = end_result(run.id, Lifecycle.COMPLETED, state, terminals, outcome)
    else:
        impl = g.plan.impls.get(p.id)
        error = NodeTimeoutError(impl.id if impl else p.id, p.id, budget)
        result = end_result(
            run.id,
            Lifecycle.FAILED,
            state,
            terminals,
            outcome,
            errors=[ErrorInfo.of(error, p.id)],
            interrupted=InterruptedAt("timeout", p.id, deadline, (p.id,)),
        )
    expect = _parked_at(token.epoch, None)
    with contextlib.suppress(StoreConflict):  # another engine moved the token first: it stands
        await _end(engine, g, now, first, result, expect, moved=q)
    return True


_new = object.__new__
# The slots' setters: the frozen dataclass's __init__ sets each field by name through
# object.__setattr__, which is slower than the slot descriptor itself.
_ex_status, _ex_epoch, _ex_alive_at = (
    Expect.__dict__[name].__set__ for name in ("status", "epoch", "alive_at")
)


def _parked_at(epoch: int, now: datetime | None) -> Expect:
    """``Expect(TokenStatus.PARKED, epoch, now)`` (what a signal's commit expects; a deadline's
    expects no ``alive_at``), built without the dataclass's __init__."""
    expect = _new(Expect)
    _ex_status(expect, TokenStatus.PARKED)
    _ex_epoch(expect, epoch)
    _ex_alive_at(expect, now)
    return expect


def _close(park: ParkRecord, status: ParkStatus, now: datetime, by: str) -> None:
    park.status = status
    park.closed_at = now
    park.closed_by = by
