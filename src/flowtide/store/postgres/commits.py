"""One commit as the PostgreSQL store applies it, in one transaction: one round trip when it
can be sent whole, two when its run must be read first.

1. **Prepared** (no database): every value kept as JSON is encoded (:func:`prepare`). A value
   that is not JSON is not raised yet: the memory store, the reference, refuses a commit for a
   conflict before it looks at its values, so the error waits for its turn.
2. **Sent whole** (:func:`sends_whole`, :func:`send_whole`): a commit whose checks are only its
   run's existence, lease (or the lease it takes: ``take_lease`` is guarded too) and lifecycle,
   its token expectations, signal keys and requests (an
   engine's step, a signal's wake: all but a deadline's firing) is sent with its writes and
   the ``COMMIT`` in one pipeline, behind guard statements that fail the transaction if they
   do not hold. Then the commit is taken the careful way, to tell why (or to apply it if the
   run changed back in between).
3. **The careful way**: the facts (first round trip): the run's row locked and its history
   counter advanced, the tokens the commit expects, which of its signal keys are answered
   already (:func:`read_facts`); the checks (:func:`flowtide.store.checks.check_commit`, as
   every store runs them); the writes (:func:`write`, second round trip, with the ``COMMIT``).
4. **Writes**: the parts in the contract's order, the events numbered from the run's counter,
   then ``settle_run``: the release, the wake instant and the notice to other processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RUNNABLE_LIFECYCLES,
    Commit,
    Expect,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.multirow import batches, many_rows, row_params
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT, text_array
from flowtide.store.sqlcore.facts import fact_reads, fill_facts
from flowtide.store.sqlcore.params import (
    EncodedCommit,
    Params,
    encode_commit,
)
from flowtide.store.sqlcore.writes import MANY_ROWS, commit_writes

__all__ = [
    "GUARD_FAILED",
    "Facts",
    "Prepared",
    "by_holder",
    "check",
    "prepare",
    "read_facts",
    "send_whole",
    "sends_whole",
    "write",
]

GUARD_FAILED = "FT001"
"""The SQLSTATE of a commit sent whole that its guard refused (migration 0006)."""

_ENDED = text_array(sorted(ENDED_LIFECYCLES))
_RUNNABLE = text_array(sorted(RUNNABLE_LIFECYCLES))
Connection = psycopg.AsyncConnection[Any]


Prepared = EncodedCommit
"""A commit with its parts as parameters, and the errors that wait for their turn."""


def prepare(c: Commit) -> Prepared:
    """``c`` encoded (:func:`flowtide.store.sqlcore.params.encode_commit`)."""
    return encode_commit(c, DIALECT)


@dataclass(slots=True)
class Facts(RunFacts):
    """What the checks and writes of one commit need to know of its run, as stored."""

    last_seq: int = 0
    """The seq the commit's events follow."""


async def read_facts(conn: Connection, c: Commit, *, creating: bool = False) -> Facts | None:
    """The facts of ``c``'s run, its row locked until the transaction ends (None if there is
    no such run); ``creating``: the run does not exist yet (only its signal keys are read)."""
    advance = {"run_id": c.run_id, "events": len(c.events)}
    run = None if creating else await conn.execute(Q["advance_run"], advance)
    sent = {
        name: await conn.execute(Q[name], params)
        for name, params in fact_reads(c, DIALECT, creating=creating).items()
    }
    facts = Facts(None)
    if run is not None:
        row = await run.fetchone()
        if row is None:
            return None
        lifecycle, owner, epoch, last_seq = row
        facts = Facts(lifecycle, owner, epoch, last_seq=last_seq)
    fill_facts(facts, c, {name: await rows.fetchall() for name, rows in sent.items()}, DIALECT)
    return facts


def check(p: Prepared, facts: Facts, *, creating: bool = False) -> None:
    """Raise what keeps ``p`` from applying to a run with these ``facts`` (``creating``: the
    lease is the creation's, checked already)."""
    check_commit(p.commit, facts, creating=creating, not_json=p.not_json)


def sends_whole(p: Prepared) -> bool:
    """Whether ``p`` may be sent whole: nothing but its run's existence, lease, lifecycle,
    token expectations, signal keys and requests answered can refuse it (the guards of
    :func:`send_whole` check those); not a commit that fires a deadline."""
    c = p.commit
    keys = [a.key for a in c.signal_answers]
    ids = [a.request_id for a in c.requests_answered]
    return not (
        p.invalid
        or p.not_json
        or len(set(keys)) < len(keys)  # (refused: the careful way tells why)
        or len(set(ids)) < len(ids)
        or c.fires_deadline is not None
    )


async def send_whole(conn: Connection, p: Prepared, channel: str) -> psycopg.AsyncCursor[Any]:
    """Queue ``p`` (see :func:`sends_whole`) behind its guard: the cursor whose row, once the
    pipeline syncs, is the seq its events follow (the sync fails with :data:`GUARD_FAILED` if
    the guard refused)."""
    c = p.commit
    lifecycles = sorted(c.run_lifecycles) if c.run_lifecycles is not None else None
    guard = {
        "run_id": c.run_id,
        "events": len(c.events),
        # (A commit taking the lease is guarded by take_lease instead.)
        "owner": c.lease.owner if c.lease is not None and c.take is None else None,
        "epoch": c.lease.epoch if c.lease is not None and c.take is None else 0,
        "lifecycles": text_array(lifecycles) if lifecycles is not None else None,
    }
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
    live = lifecycles is not None and ENDED_LIFECYCLES.isdisjoint(lifecycles)
    await write(conn, p, channel, by_holder=by_holder(c), ended=False if live else None)
    return advanced


def by_holder(c: Commit) -> bool:
    """Whether ``c`` comes from its run's holder (under its lease, or taking it)."""
    return c.lease is not None or c.take is not None


async def write(
    conn: Connection, p: Prepared, channel: str, *, by_holder: bool, ended: bool | None
) -> None:
    """Queue the writes of a checked commit (they run when the pipeline next syncs), its events
    numbered from its run's counter (advanced already). ``by_holder``: the commit comes from the
    run's holder (it was made under the run's lease), who needs no notice of what it changed
    itself; ``ended``: whether the run had ended before it (None: not known)."""
    c = p.commit
    cursor = conn.cursor()
    for name, rows in commit_writes(p, DIALECT, ended):
        await _run(cursor, name, rows)
    ending = p.run is not None and bool(p.run["ended"])
    await cursor.execute(
        Q["settle_run"],
        {
            "run_id": c.run_id,
            "release": c.release,
            "ended": _ENDED,
            "runnable": _RUNNABLE,
            "channel": channel,
            "payload": c.run_id[:200],
            # (who waits elsewhere for an answer or for the run's end is told at once)
            "tell": bool(p.answers or p.requests) or ending,
            "by_holder": by_holder,
        },
    )
    for woken in dict.fromkeys(e.run_id for e in c.wakes):
        # (Another run's wake: whoever holds it, or any worker, is told at once.)
        await cursor.execute(
            Q["settle_run"],
            {
                "run_id": woken,
                "release": False,
                "ended": _ENDED,
                "runnable": _RUNNABLE,
                "channel": channel,
                "payload": woken[:200],
                "tell": True,
                "by_holder": False,
            },
        )


async def _run(cursor: psycopg.AsyncCursor[Any], name: str, rows: list[Params]) -> None:
    """Statement ``name`` for each of ``rows`` (an insert of :data:`MANY_ROWS`: many rows a
    statement; one row alone: a plain statement, which costs less)."""
    if len(rows) == 1:
        await cursor.execute(Q[name], rows[0])
    elif name in MANY_ROWS:
        for batch in batches(rows):
            await cursor.execute(many_rows(Q[name], len(batch)), row_params(batch))
    elif rows:
        await cursor.executemany(Q[name], rows)


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
