"""Commits and new runs, each applied in the write transaction the store's thread has open
(:mod:`flowtide.store.sqlite.group`): a commit that raises is rolled back to its savepoint.

A commit's records are encoded (:func:`encode_commit`) in the caller's task, before it is sent
to the store's thread: what the caller changes afterwards changes nothing. A record that cannot
be encoded (a value that is not JSON) is reported as the memory store reports it: after the
commit's checks (its run, lease, lifecycle, expectations and signal keys), nothing written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowtide.store.base import (
    Commit,
    Lease,
    LeaseLost,
    RunRecord,
    StoreError,
    UnknownRunError,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.sqlcore.params import EncodedCommit, Params, run_params, state_params
from flowtide.store.sqlcore.params import encode_commit as _encode
from flowtide.store.sqlcore.writes import commit_writes
from flowtide.store.sqlite.rows import DIALECT, maybe_instant, micros
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["NewRun", "apply_commit", "create_run", "encode_commit", "encode_run"]


@dataclass(slots=True)
class NewRun:
    """A new run's record and initial state as parameters (or why they could not be encoded)."""

    run: Params | None = None
    state: list[Params] = field(default_factory=list)
    error: Exception | None = None


def encode_run(run: RunRecord, state: Mapping[str, Any]) -> NewRun:
    try:
        return NewRun(run_params(run, "run", DIALECT), state_params(run.id, state, DIALECT))
    except Exception as error:  # (reported after the run's own checks, as the memory store does)
        return NewRun(error=error)


def encode_commit(c: Commit) -> EncodedCommit:
    """``c``'s parts as parameters (:func:`flowtide.store.sqlcore.params.encode_commit`)."""
    return _encode(c, DIALECT)


# -- in the store's thread ------------


def apply_commit(conn: sqlite3.Connection, c: Commit, encoded: EncodedCommit) -> int:
    """Apply ``c`` (raising, before or after writing part of it, if it must not apply: the
    caller rolls its savepoint back); returns the ``seq`` of its first event."""
    row = conn.execute(QUERIES["advance_run"], {"run_id": c.run_id}).fetchone()
    if row is None:
        raise UnknownRunError(c.run_id)
    facts = _facts(conn, c, row["lifecycle"])
    facts.owner, facts.epoch = row["owner"], row["epoch"]
    check_commit(c, facts, not_json=encoded.not_json)
    _write(conn, encoded, bool(row["ended"]), row["last_seq"])
    return int(row["last_seq"]) + 1


def create_run(
    conn: sqlite3.Connection,
    run: RunRecord,
    new: NewRun,
    step: tuple[Commit, EncodedCommit] | None,
    lease: Lease | None,
) -> int:
    """Insert ``run`` and apply its first commit (``step``) with it, whole or not at all;
    returns the ``seq`` of the commit's first event."""
    if conn.execute(QUERIES["run_exists"], {"run_id": run.id}).fetchone()[0]:
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
        check_commit(c, _facts(conn, c, None), creating=True, not_json=encoded.not_json)
    held: Params = {"owner": None, "epoch": 0, "lease_expires": None}
    if lease is not None:
        held = {
            "owner": lease.owner,
            "epoch": lease.epoch,
            "lease_expires": micros(lease.expires),
        }
    conn.execute(QUERIES["insert_run"], {**new.run, **held})
    _run(conn, "put_state", new.state)
    if step is not None:
        _write(conn, step[1], bool(new.run["ended"]), 0)
    conn.execute(QUERIES["settle_run"], {"run_id": run.id, "release": False})
    return 1


def _facts(conn: sqlite3.Connection, c: Commit, lifecycle: str | None) -> RunFacts:
    """What ``c`` is checked against, its run's ``lifecycle`` as stored (None: the commit
    creates it)."""
    run_id = c.run_id
    array = DIALECT.array
    tokens = {}
    if c.expect:
        found = conn.execute(
            QUERIES["expected_tokens"], {"run_id": run_id, "ids": array(list(c.expect))}
        )
        tokens = {r[0]: (r[1], r[2], maybe_instant(r[3])) for r in found}
    answered: set[str] = set()
    if c.signal_answers:
        keys = array([a.key for a in c.signal_answers])
        answered = {r[0] for r in conn.execute(QUERIES["answered_keys"], {"keys": keys})}
    unanswerable: dict[str, str] = {}
    if c.requests_answered:
        ids = [a.request_id for a in c.requests_answered]
        params = {"ids": array(ids), "run_id": run_id}
        why = {r[0]: r[1] for r in conn.execute(QUERIES["unanswered_requests"], params)}
        refused = {request_id: why.get(request_id, "unknown") for request_id in ids}
        unanswerable = {key: no for key, no in refused.items() if no is not None}
    before = None
    if c.fires_deadline is not None and lifecycle is not None:
        at = {"run_id": run_id, "at": micros(c.fires_deadline)}
        before = conn.execute(QUERIES["deadline_check"], at).fetchone()[1]
    return RunFacts(
        lifecycle,
        tokens=tokens,
        answered=answered,
        unanswerable=unanswerable,
        request_before=before,
    )


def _write(conn: sqlite3.Connection, p: EncodedCommit, ended: bool, last_seq: int) -> None:
    """Write a checked commit (:func:`flowtide.store.sqlcore.writes.commit_writes`), its
    events numbered after ``last_seq``; ``ended``: whether the run had ended before it."""
    c = p.commit
    for name, rows in commit_writes(p, DIALECT, ended, last_seq):
        _run(conn, name, rows)
    if c.fires_deadline is not None:
        at = {"run_id": c.run_id, "at": micros(c.fires_deadline)}
        conn.execute(QUERIES["note_deadline_fired"], at)
    due_changed = c.due_cleared or c.due_dropped or c.due_fired or c.due
    if due_changed or p.run is not None or c.release:
        conn.execute(QUERIES["settle_run"], {"run_id": c.run_id, "release": c.release})


def _run(conn: sqlite3.Connection, name: str, rows: list[Params]) -> None:
    """Statement ``name`` for each of ``rows``: one prepared statement bound again for each row
    (measured: on SQLite this costs less than one statement of many rows, which PostgreSQL
    uses)."""
    if len(rows) == 1:
        conn.execute(QUERIES[name], rows[0])
    else:
        conn.executemany(QUERIES[name], rows)
