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
from typing import Any

from flowtide.store.base import (
    Commit,
    Lease,
    RunRecord,
    UnknownRunError,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.facts import fact_reads, fill_facts
from flowtide.store.sqlcore.params import EncodedCommit, Params
from flowtide.store.sqlcore.params import encode_commit as _encode
from flowtide.store.sqlcore.writes import commit_writes
from flowtide.store.sqlite.rows import DIALECT, micros
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["apply_commit", "create_run", "encode_commit", "new_run"]


def new_run(
    run: RunRecord, state: Mapping[str, Any], commit: Commit | None, lease: Lease | None
) -> Creation:
    """A new run and its first commit as parameters (:class:`Creation`)."""
    return Creation.of(run, state, commit, lease, DIALECT)


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


def create_run(conn: sqlite3.Connection, creation: Creation) -> int:
    """Insert a new run and apply its first commit with it, whole or not at all; returns the
    ``seq`` of the commit's first event."""
    run_id = creation.run.id
    exists = bool(conn.execute(QUERIES["run_exists"], {"run_id": run_id}).fetchone()[0])
    # (The run is not stored yet: it has no lifecycle, no tokens.)
    creation.check(exists, _facts(conn, creation.step.commit, None))
    conn.execute(QUERIES["insert_run"], creation.row)
    _run(conn, "put_state", creation.state)
    _write(conn, creation.step, creation.ended, 0)
    conn.execute(QUERIES["settle_run"], {"run_id": run_id, "release": False})
    return 1


def _facts(conn: sqlite3.Connection, c: Commit, lifecycle: str | None) -> RunFacts:
    """What ``c`` is checked against, its run's ``lifecycle`` as stored (None: the commit
    creates it)."""
    facts = RunFacts(lifecycle)
    reads = fact_reads(c, DIALECT, creating=lifecycle is None)
    if reads:
        found = {name: conn.execute(QUERIES[name], p).fetchall() for name, p in reads.items()}
        fill_facts(facts, c, found, DIALECT)
    return facts


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
    if due_changed or p.run is not None or c.release or c.take is not None:
        conn.execute(QUERIES["settle_run"], {"run_id": c.run_id, "release": c.release})
    for woken in dict.fromkeys(e.run_id for e in c.wakes):
        conn.execute(QUERIES["settle_run"], {"run_id": woken, "release": False})


def _run(conn: sqlite3.Connection, name: str, rows: list[Params]) -> None:
    """Statement ``name`` for each of ``rows``: one prepared statement bound again for each row
    (measured: on SQLite this costs less than one statement of many rows, which PostgreSQL
    uses)."""
    if len(rows) == 1:
        conn.execute(QUERIES[name], rows[0])
    else:
        conn.executemany(QUERIES[name], rows)
