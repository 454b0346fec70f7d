"""Leases and wake instants, in the store's thread: each write runs in the ``BEGIN IMMEDIATE``
transaction the thread has open (:mod:`flowtide.store.sqlite.group`), and its UPDATE re-checks
who may take the run and brings its wake instant up to date (see ``queries.sql``), so that
claims from many connections, in many processes, never hand one run to two owners."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import datetime

from flowtide.store.base import Lease, UnknownRunError
from flowtide.store.sqlite.rows import instant, micros, read_lease
from flowtide.store.sqlite.sql import QUERIES

__all__ = ["acquire_run", "claim_runs", "lease_of", "next_wake", "release_runs", "renew_leases"]


def next_wake(conn: sqlite3.Connection) -> datetime | None:
    row = conn.execute(QUERIES["next_wake"]).fetchone()
    return instant(row["wake_at"]) if row is not None else None


def claim_runs(
    conn: sqlite3.Connection, owner: str, now: datetime, expires: datetime, limit: int
) -> list[Lease]:
    """The runs taken, by run id (which ones: the earliest wakes)."""
    if limit <= 0:
        return []  # (SQLite would read a negative LIMIT as none at all)
    params = {"owner": owner, "now": micros(now), "expires": micros(expires), "limit": limit}
    # (Whom each was taken from is read first: the UPDATE's RETURNING sees only the new owner.)
    held = {row["id"]: row["owner"] for row in conn.execute(QUERIES["claimable_runs"], params)}
    if not held:
        return []
    params["ids"] = json.dumps(list(held))
    rows = conn.execute(QUERIES["claim_runs"], params)
    leases = [_taken(read_lease(row), held[row["id"]]) for row in rows]
    return sorted(leases, key=lambda lease: lease.run_id)


def acquire_run(
    conn: sqlite3.Connection,
    run_id: str,
    owner: str,
    now: datetime,
    expires: datetime,
    force: bool,
) -> Lease | None:
    held = conn.execute(QUERIES["lease_of"], {"id": run_id}).fetchone()
    if held is None:
        raise UnknownRunError(run_id)
    params = {
        "id": run_id,
        "owner": owner,
        "now": micros(now),
        "expires": micros(expires),
        "force": force,
    }
    row = conn.execute(QUERIES["take_run"], params).fetchone()
    if row is None:
        return None  # (it has ended, or another owner holds it alive)
    return _taken(read_lease(row), held["owner"])


def _taken(lease: Lease, before: str | None) -> Lease:
    """``lease``, saying whom it was taken from if ``before`` was another owner."""
    if before is None or before == lease.owner:
        return lease
    return replace(lease, taken_from=before)


def renew_leases(conn: sqlite3.Connection, owner: str, expires: datetime) -> list[Lease]:
    params = {"owner": owner, "expires": micros(expires)}
    leases = [read_lease(row) for row in conn.execute(QUERIES["renew_leases"], params)]
    return sorted(leases, key=lambda lease: lease.run_id)


def release_runs(conn: sqlite3.Connection, owner: str) -> list[str]:
    released = [row["id"] for row in conn.execute(QUERIES["release_runs"], {"owner": owner})]
    return sorted(released)


def lease_of(conn: sqlite3.Connection, run_id: str) -> Lease | None:
    row = conn.execute(QUERIES["lease_of"], {"id": run_id}).fetchone()
    if row is None:
        raise UnknownRunError(run_id)
    if row["owner"] is None:
        return None
    return Lease(run_id, row["owner"], row["epoch"], instant(row["lease_expires"]))
