"""Commits and new runs, each applied in the write transaction the store's thread has open
(:mod:`flowtide.store.sqlite.group`): a commit that raises is rolled back to its savepoint.

A commit's records are encoded (:func:`encode_commit`) in the caller's task, before it is sent
to the store's thread: what the caller changes afterwards changes nothing. A record that cannot
be encoded (a value that is not JSON) is reported as the memory store reports it: after the
commit's checks (its run, lease, lifecycle, expectations and signal keys), nothing written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    Commit,
    DueEntry,
    Lease,
    LeaseLost,
    RunRecord,
    StoreError,
    UnknownRunError,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.multirow import batches, many_rows, row_params
from flowtide.store.sqlite.requests import answer_params as request_answer_params
from flowtide.store.sqlite.requests import request_before, unanswerable
from flowtide.store.sqlite.rows import (
    Params,
    anchor_item,
    answer_params,
    event_params,
    maybe_instant,
    micros,
    park_params,
    run_params,
    scatter_params,
    state_params,
    token_params,
)
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["Encoded", "NewRun", "apply_commit", "create_run", "encode_commit", "encode_run"]


@dataclass(slots=True)
class Encoded:
    """A commit's parts as statement parameters; ``error``: why it could not be encoded (raised
    once the commit's checks have passed)."""

    run: Params | None = None
    tokens: list[Params] = field(default_factory=list)
    state: list[Params] = field(default_factory=list)
    events: list[Params] = field(default_factory=list)
    due: list[Params] = field(default_factory=list)
    due_fired: list[Params] = field(default_factory=list)
    anchors: list[Params] = field(default_factory=list)
    anchors_released: list[Params] = field(default_factory=list)
    scatter: list[Params] = field(default_factory=list)
    parks: list[Params] = field(default_factory=list)
    answers: list[Params] = field(default_factory=list)
    requests_answered: list[Params] = field(default_factory=list)
    error: Exception | None = None

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error


@dataclass(slots=True)
class NewRun:
    """A new run's record and initial state as parameters (or why they could not be encoded)."""

    run: Params | None = None
    state: list[Params] = field(default_factory=list)
    error: Exception | None = None


def encode_run(run: RunRecord, state: Mapping[str, Any]) -> NewRun:
    try:
        return NewRun(run_params(run, "run"), state_params(run.id, state))
    except Exception as error:  # (reported after the run's own checks, as the memory store does)
        return NewRun(error=error)


def encode_commit(c: Commit) -> Encoded:
    """``c``'s parts as parameters, in the order the memory store encodes them (so that the
    first value refused is the same)."""
    run_id = c.run_id
    try:
        return Encoded(
            run=run_params(c.run, "run") if c.run is not None else None,
            tokens=[token_params(run_id, t, f"tokens/{i}") for i, t in enumerate(c.tokens)],
            state=state_params(run_id, c.state or {}),
            events=[event_params(run_id, e, f"events/{i}") for i, e in enumerate(c.events)],
            scatter=[scatter_params(s, f"scatter/{i}") for i, s in enumerate(c.scatter)],
            parks=[park_params(p, f"parks/{i}") for i, p in enumerate(c.parks)],
            answers=[
                answer_params(a, f"signal_answers/{i}") for i, a in enumerate(c.signal_answers)
            ],
            requests_answered=request_answer_params(c.requests_answered),
            due=_due_params(run_id, c.due),
            due_fired=_due_params(run_id, c.due_fired),
            anchors=[_anchor_params(a.run_id, a.placement, a.item, a.at) for a in c.anchors],
            anchors_released=[
                _anchor_params(run_id, placement, item) for placement, item in c.anchors_released
            ],
        )
    except Exception as error:  # (reported after the commit's checks, as the memory store does)
        return Encoded(error=error)


def _due_params(run_id: str, entries: Sequence[DueEntry]) -> list[Params]:
    return [
        {"run_id": run_id, "token_id": e.token_id, "purpose": e.purpose, "due_at": micros(e.when)}
        for e in entries
    ]


def _anchor_params(
    run_id: str, placement: str, item: str | None, at: datetime | None = None
) -> Params:
    params: Params = {"run_id": run_id, "placement": placement, "item": anchor_item(item)}
    if at is not None:
        params["at"] = micros(at)
    return params


# -- in the store's thread ------------


def apply_commit(conn: sqlite3.Connection, c: Commit, encoded: Encoded) -> int:
    """Apply ``c`` (raising, before or after writing part of it, if it must not apply: the
    caller rolls its savepoint back); returns the ``seq`` of its first event."""
    advance = {"id": c.run_id, "events": len(c.events)}
    row = conn.execute(QUERIES["advance_run"], advance).fetchone()
    if row is None:
        raise UnknownRunError(c.run_id)
    facts = _facts(conn, c, row["lifecycle"])
    facts.owner, facts.epoch = row["owner"], row["epoch"]
    check_commit(c, facts, not_json=encoded.error)
    return _write(conn, c, encoded, bool(row["ended"]), row["last_seq"])


def create_run(
    conn: sqlite3.Connection,
    run: RunRecord,
    new: NewRun,
    step: tuple[Commit, Encoded] | None,
    lease: Lease | None,
) -> int:
    """Insert ``run`` and apply its first commit (``step``) with it, whole or not at all;
    returns the ``seq`` of the commit's first event."""
    if conn.execute(QUERIES["run_exists"], {"id": run.id}).fetchone() is not None:
        raise StoreError(f"run {run.id!r} already exists")
    if step is not None and step[0].run_id != run.id:
        raise ValueError(f"a commit of run {step[0].run_id!r} cannot create run {run.id!r}")
    if lease is not None and lease.run_id != run.id:
        raise ValueError(f"a lease on run {lease.run_id!r} cannot create run {run.id!r}")
    if new.error is not None or new.run is None:
        raise new.error or ValueError(f"run {run.id!r} was not encoded")
    if step is not None:
        c, encoded = step
        if c.lease is not None and c.lease != lease:
            raise LeaseLost(f"run {run.id!r} is created without the lease its commit carries")
        # (The run is not stored yet: it has no lifecycle, no tokens.)
        check_commit(c, _facts(conn, c, None), creating=True, not_json=encoded.error)
    held: Params = {"owner": None, "epoch": 0, "lease_expires": None}
    if lease is not None:
        held = {
            "owner": lease.owner,
            "epoch": lease.epoch,
            "lease_expires": micros(lease.expires),
        }
    counted = {"last_seq": len(step[0].events) if step is not None else 0}
    conn.execute(QUERIES["insert_run"], {**new.run, **held, **counted})
    _many(conn, "put_state", new.state)
    first = _write(conn, step[0], step[1], new.run["ended"], 0) if step is not None else 1
    conn.execute(QUERIES["settle_run"], {"id": run.id, "release": False})
    return first


def _facts(conn: sqlite3.Connection, c: Commit, lifecycle: str | None) -> RunFacts:
    """What ``c`` is checked against, its run's ``lifecycle`` as stored (None: the commit
    creates it)."""
    run_id = c.run_id
    tokens = {}
    for token_id in c.expect:
        found = conn.execute(QUERIES["expected_token"], {"run_id": run_id, "id": token_id})
        if (row := found.fetchone()) is not None:
            tokens[token_id] = (row["status"], row["epoch"], maybe_instant(row["deadline"]))
    answered = {
        a.key
        for a in c.signal_answers
        if conn.execute(QUERIES["answered"], {"key": a.key}).fetchone() is not None
    }
    before = None
    if c.fires_deadline is not None and lifecycle is not None:
        before = request_before(conn, run_id, c.fires_deadline)
    return RunFacts(
        lifecycle,
        tokens=tokens,
        answered=answered,
        unanswerable=unanswerable(conn, run_id, c.requests_answered),
        request_before=before,
    )


def _write(
    conn: sqlite3.Connection, c: Commit, encoded: Encoded, ended: bool, last_seq: int
) -> int:
    """Write a checked commit, in the order of :meth:`Store.commit`, its events numbered after
    ``last_seq`` (the run's counter is advanced already); returns the ``seq`` of its first
    event."""
    run_id = c.run_id
    if encoded.run is not None:
        conn.execute(QUERIES["write_run"], encoded.run)
        ended = encoded.run["ended"]
    _insert(conn, "put_token", encoded.tokens)
    _many(conn, "put_state", encoded.state)
    _many(conn, "delete_state", [{"run_id": run_id, "key": key} for key in c.state_deleted])
    first = last_seq + 1
    for seq, event in enumerate(encoded.events, first):
        event["seq"] = seq
    _insert(conn, "insert_event", encoded.events)
    due_changed = _write_due(conn, c, encoded)
    if ended:
        conn.execute(QUERIES["delete_all_due"], {"run_id": run_id})
    _many(conn, "put_anchor", encoded.anchors)
    _many(conn, "release_anchor", encoded.anchors_released)
    _many(conn, "put_scatter_item", encoded.scatter)
    _many(conn, "put_park", encoded.parks)
    _many(conn, "insert_answer", encoded.answers)
    _many(conn, "answer_request", encoded.requests_answered)
    if c.fires_deadline is not None:
        at = {"run_id": run_id, "at": micros(c.fires_deadline)}
        conn.execute(QUERIES["deadline_fired"], at)
    if due_changed or encoded.run is not None or c.release:
        conn.execute(QUERIES["settle_run"], {"id": run_id, "release": c.release})
    return first


def _write_due(conn: sqlite3.Connection, c: Commit, encoded: Encoded) -> bool:
    """Due entries cleared by token, dropped by purpose and fired, then set; True if the commit
    touched any."""
    run_id = c.run_id
    _many(conn, "clear_due", [{"run_id": run_id, "token_id": t} for t in c.due_cleared])
    _many(
        conn,
        "drop_due",
        [{"run_id": run_id, "token_id": t, "purpose": p} for t, p in c.due_dropped],
    )
    _many(conn, "fire_due", encoded.due_fired)
    _many(conn, "set_due", encoded.due)
    return bool(c.due_cleared or c.due_dropped or encoded.due_fired or encoded.due)


def _many(conn: sqlite3.Connection, name: str, rows: list[Params]) -> None:
    if rows:
        conn.executemany(QUERIES[name], rows)


def _insert(conn: sqlite3.Connection, name: str, rows: list[Params]) -> None:
    """Insert ``rows`` with statement ``name``, many rows a statement."""
    for batch in batches(rows):
        if len(batch) == 1:
            conn.execute(QUERIES[name], batch[0])
        else:
            conn.execute(many_rows(QUERIES[name], len(batch)), row_params(batch))
