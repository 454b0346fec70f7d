"""The memory store's writes of a run: its creation and its commits.

A commit is checked whole (the run, its expectations, its signal keys, every value it would keep
as JSON) before anything changes, and applied without yielding to the event loop, so other tasks
see all of it or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    Commit,
    EventRecord,
    Lease,
    LeaseLost,
    RunRecord,
    StoreError,
    UnknownRunError,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.jsonvalues import encode_json, encode_state
from flowtide.store.memory.leases import Leases
from flowtide.store.memory.rows import AnswerRow, EventRow, ParkRow, RunRow, ScatterRow, TokenRow
from flowtide.store.memory.tables import Tables

__all__ = ["Commits"]


class Commits:
    """Creates runs in ``tables`` and applies their commits (leases and wake instants kept by
    ``leases``)."""

    def __init__(self, tables: Tables, leases: Leases) -> None:
        self._anchors = tables.anchors
        self._answers = tables.answers
        self._deadlines_fired = tables.deadlines_fired
        self._due = tables.due
        self._due_order = tables.due_order
        self._epochs = tables.epochs
        self._history = tables.history
        self._leases = tables.leases
        self._pending = tables.pending
        self._put_park = tables.put_park
        self._requests = tables.requests
        self._runs = tables.runs
        self._scatter = tables.scatter
        self._states = tables.states
        self._tokens = tables.tokens
        self._hold = leases.hold
        self._let_go = leases.let_go
        self._rewake = leases.rewake

    def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        if run.id in self._runs:
            raise StoreError(f"run {run.id!r} already exists")
        if commit is not None and commit.run_id != run.id:
            raise ValueError(f"a commit of run {commit.run_id!r} cannot create run {run.id!r}")
        if lease is not None and lease.run_id != run.id:
            raise ValueError(f"a lease on run {lease.run_id!r} cannot create run {run.id!r}")
        row = RunRow.of(run, "run")
        initial = encode_state(state)
        if commit is not None and commit.lease is not None and commit.lease != lease:
            raise LeaseLost(f"run {run.id!r} is created without the lease its commit carries")
        step = self._prepared(commit, created=True) if commit is not None else None
        self._runs[run.id] = row
        self._states[run.id] = initial
        self._tokens[run.id] = {}
        self._history[run.id] = []
        self._due[run.id] = {}
        self._epochs[run.id] = lease.epoch if lease is not None else 0
        if lease is not None:
            self._hold(lease)
        events = self._apply(step) if step is not None else []
        self._rewake(run.id, tell=lease is None)  # (nobody holds it: it needs a worker)
        return events

    def commit(self, commit: Commit) -> Sequence[EventRecord]:
        if commit.run_id not in self._runs:
            raise UnknownRunError(commit.run_id)
        events = self._apply(self._prepared(commit))
        self._rewake(commit.run_id)
        return events

    def _prepared(self, c: Commit, *, created: bool = False) -> Step:
        """``c`` checked and encoded: raises (having changed nothing) if it cannot apply."""
        check_commit(c, self._facts(c), creating=created)
        # (Most commits carry a token, an event or two and little else: what they do not carry
        # costs nothing.)
        return Step(
            c,
            RunRow.of(c.run, "run") if c.run is not None else None,
            [TokenRow.of(t, f"tokens/{i}") for i, t in enumerate(c.tokens)],
            encode_state(c.state) if c.state else {},
            [EventRow.of(e, f"events/{i}") for i, e in enumerate(c.events)],
            [ScatterRow.of(s, f"scatter/{i}") for i, s in enumerate(c.scatter)]
            if c.scatter
            else [],
            [ParkRow.of(p, f"parks/{i}") for i, p in enumerate(c.parks)] if c.parks else [],
            [AnswerRow.of(a, f"signal_answers/{i}") for i, a in enumerate(c.signal_answers)]
            if c.signal_answers
            else [],
            [
                (a.request_id, encode_json(a.answer, f"requests_answered/{i}/answer"), a.at)
                for i, a in enumerate(c.requests_answered)
            ]
            if c.requests_answered
            else [],
        )

    def _facts(self, c: Commit) -> RunFacts:
        """What ``c`` is checked against (:func:`flowtide.store.checks.check_commit`)."""
        run_id = c.run_id
        stored = self._runs.get(run_id)
        held = self._leases.get(run_id)
        tokens = self._tokens.get(run_id, {})
        expected = (
            {
                token_id: (row.status, row.epoch, row.deadline)
                for token_id in c.expect
                if (row := tokens.get(token_id)) is not None
            }
            if c.expect
            else {}
        )
        unanswerable: dict[str, str] = {}
        for answer in c.requests_answered:
            kept = self._requests.get(answer.request_id)
            if kept is None or kept.record.run_id != run_id:
                unanswerable[answer.request_id] = "unknown"
            elif kept.answer is not None:
                unanswerable[answer.request_id] = "answered"
        before = None
        if c.fires_deadline is not None:
            before = next(
                (
                    r.record.id
                    for r in self._pending(run_id)
                    if r.record.requested_at < c.fires_deadline
                ),
                None,
            )
        return RunFacts(
            stored.record.lifecycle if stored is not None else None,
            held.owner if held is not None else None,
            self._epochs.get(run_id, 0),
            expected,
            {a.key for a in c.signal_answers if a.key in self._answers} if c.signal_answers else (),
            unanswerable,
            before,
        )

    def _apply(self, step: Step) -> list[EventRecord]:
        """Apply a prepared commit (nothing here can fail); returns its events as stored."""
        c = step.commit
        run_id = c.run_id
        if step.run is not None:
            self._runs[run_id] = step.run
        tokens = self._tokens[run_id]
        for token in step.tokens:
            tokens[token.id] = token
        state = self._states[run_id]
        state.update(step.state)
        for key in c.state_deleted:
            state.pop(key, None)
        history = self._history[run_id]
        first = len(history) + 1
        for seq, (kept, given) in enumerate(zip(step.events, c.events, strict=True), first):
            kept.seq = given.seq = seq  # (the caller's records too: a database returns it)
            history.append(kept)
        due = self._due[run_id]
        for token_id in c.due_cleared:
            for name in [name for name in due if name[0] == token_id]:
                del due[name]
        for token_id, purpose in c.due_dropped:
            due.pop((token_id, purpose), None)
        for entry in c.due_fired:
            fired = due.get((entry.token_id, entry.purpose))
            if fired is not None and fired[0] == entry.when:
                del due[(entry.token_id, entry.purpose)]
        for entry in c.due:
            due[(entry.token_id, entry.purpose)] = (entry.when, next(self._due_order))
        if self._runs[run_id].record.lifecycle in ENDED_LIFECYCLES:
            due.clear()
        for entry in c.wakes:  # (another run's entry: kept unless that run has ended)
            woken = self._runs.get(entry.run_id)
            if woken is not None and woken.record.lifecycle not in ENDED_LIFECYCLES:
                instant = (entry.when, next(self._due_order))
                self._due[entry.run_id][(entry.token_id, entry.purpose)] = instant
                self._rewake(entry.run_id, tell=True)  # (its holder may be another engine)
        for anchor in c.anchors:
            self._anchors.setdefault(anchor.run_id, {})[(anchor.placement, anchor.item)] = anchor.at
        for placement, item in c.anchors_released:
            self._anchors.get(run_id, {}).pop((placement, item), None)
        for row in step.scatter:
            done = row.record
            self._scatter.setdefault((done.run_id, done.progress), {})[done.index] = row
        for park in step.parks:
            self._put_park(park)
        for answer in step.answers:
            self._answers[answer.record.key] = answer
        for request_id, text, when in step.requests_answered:
            request = self._requests[request_id]
            request.answer, request.record.answered_at = text, when
        if c.fires_deadline is not None:
            latest = self._deadlines_fired.get(run_id, c.fires_deadline)
            self._deadlines_fired[run_id] = max(c.fires_deadline, latest)
        if c.take is not None:
            self._hold(c.take.lease)
        if c.release:
            self._let_go(run_id)
        return list(c.events)


@dataclass(slots=True)
class Step:
    """A commit whose checks passed, with what it keeps as JSON already encoded."""

    commit: Commit
    run: RunRow | None
    tokens: list[TokenRow]
    state: dict[str, str]
    events: list[EventRow]
    scatter: list[ScatterRow]
    parks: list[ParkRow]
    answers: list[AnswerRow]
    requests_answered: list[tuple[str, str, datetime]]
    """(request id, answer as JSON, when)."""
