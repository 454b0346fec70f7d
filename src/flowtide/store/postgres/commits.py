"""A commit sent whole on PostgreSQL: one round trip, its checks made by guards in the database.

A commit is encoded first, in the caller's task (:func:`prepare`). One whose checks are only its
run's existence, lease (or the lease it takes, in the same statement) and lifecycle, its
token expectations, signal keys, requests and the deadline it fires (an engine's step, a signal's
wake, a deadline's firing: :func:`sends_whole`) is sent with its writes and the ``COMMIT`` in one
pipeline, behind guard statements that fail the transaction if they do not hold (the deadline's on
the database's clock): :func:`send_whole`. Refused, it is then taken the careful way, to tell why
(or to apply it if the run changed back in between): its run read first, the checks every store
runs, then the writes (:func:`flowtide.store.sqlcore.commits.apply_commit`, two round trips). So is
a commit the guards cannot check (one refused already by its own parts).
"""

from __future__ import annotations

from typing import Any

import psycopg

from flowtide.store.base import ENDED_LIFECYCLES, Commit, Expect
from flowtide.store.postgres.connector import put
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT, text_array
from flowtide.store.sqlcore.params import EncodedCommit, encode_commit
from flowtide.store.sqlcore.writes import by_holder, commit_writes

__all__ = ["GUARD_FAILED", "Prepared", "prepare", "send_whole", "sends_whole"]

GUARD_FAILED = "FT001"
"""The SQLSTATE of a commit sent whole that its guard refused (migration 0006)."""

Connection = psycopg.AsyncConnection[Any]

Prepared = EncodedCommit
"""A commit with its parts as parameters, and the errors that wait for their turn."""


def prepare(c: Commit) -> Prepared:
    """``c`` encoded (:func:`flowtide.store.sqlcore.params.encode_commit`)."""
    return encode_commit(c, DIALECT)


def sends_whole(p: Prepared) -> bool:
    """Whether ``p`` may be sent whole: nothing but its run's existence, lease, lifecycle,
    token expectations, signal keys, requests answered and the deadline it fires can refuse it
    (the guards of :func:`send_whole` check those)."""
    c = p.commit
    keys = [a.key for a in c.signal_answers]
    ids = [a.request_id for a in c.requests_answered]
    return not (
        p.invalid
        or p.not_json
        or len(set(keys)) < len(keys)  # (refused: the careful way tells why)
        or len(set(ids)) < len(ids)
    )


async def send_whole(conn: Connection, p: Prepared, *, own_clock: bool) -> psycopg.AsyncCursor[Any]:
    """Queue ``p`` (see :func:`sends_whole`) behind its guard: the cursor whose row, once the
    pipeline syncs, is the seq its events follow (the sync fails with :data:`GUARD_FAILED` if
    the guard refused). ``own_clock``: a deadline it fires is judged on the database's clock
    (else only against the requests recorded before it)."""
    c = p.commit
    lifecycles = sorted(c.run_lifecycles) if c.run_lifecycles is not None else None
    guard = {
        "run_id": c.run_id,
        "events": len(c.events),
        "lifecycles": text_array(lifecycles) if lifecycles is not None else None,
    }
    if p.take is not None:  # (the lease taken, and checked, as the run's counter advances)
        advanced = await conn.execute(Q["advance_run_taking"], p.take | guard)
    else:
        guard["owner"] = c.lease.owner if c.lease is not None else None
        guard["epoch"] = c.lease.epoch if c.lease is not None else 0
        advanced = await conn.execute(Q["advance_run_guarded"], guard)
    if c.expect:
        await conn.execute(Q["expect_tokens_guarded"], _expected(c))
    if c.signal_answers or c.requests_answered:
        answers = {
            "run_id": c.run_id,
            "keys": text_array([a.key for a in c.signal_answers]),
            "ids": text_array([a.request_id for a in c.requests_answered]),
        }
        await conn.execute(Q["answers_guarded"], answers)
    if c.fires_deadline is not None:
        deadline = {"run_id": c.run_id, "at": c.fires_deadline, "on_clock": own_clock}
        await conn.execute(Q["deadline_guarded"], deadline)
    live = lifecycles is not None and ENDED_LIFECYCLES.isdisjoint(lifecycles)
    ended = False if live else None
    writes = commit_writes(p, DIALECT, ended, by_holder=by_holder(c), taken=p.take is not None)
    await put(conn, writes)
    return advanced


def _expected(c: Commit) -> dict[str, Any]:
    """The parameters of ``expect_tokens_guarded`` for ``c``'s expectations."""
    wanted = [e if isinstance(e, Expect) else Expect(e) for e in c.expect.values()]
    statuses = [
        ",".join(sorted(e.status)) if isinstance(e.status, frozenset) else str(e.status)
        for e in wanted
    ]
    return {
        "run_id": c.run_id,
        "n": len(wanted),
        "ids": text_array(list(c.expect)),
        "statuses": text_array(statuses),
        "epochs": [e.epoch for e in wanted],
        "alive": [e.alive_at for e in wanted],
    }
