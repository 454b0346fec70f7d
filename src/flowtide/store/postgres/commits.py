"""One commit as the PostgreSQL store applies it, in one transaction: one round trip when it
can be sent whole, two when its run must be read first.

1. **Prepared** (no database): every value kept as JSON is encoded (:func:`prepare`). A value
   that is not JSON is not raised yet: the memory store, the reference, refuses a commit for a
   conflict before it looks at its values, so the error waits for its turn.
2. **Sent whole** (:func:`sends_whole`, :func:`send_whole`): a commit whose checks are only its
   run's existence, lease and lifecycle, its token expectations, signal keys and requests (an
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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RUNNABLE_LIFECYCLES,
    Commit,
    Expect,
    Lease,
    LeaseLost,
    RunRecord,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.jsonvalues import NotJSONError
from flowtide.store.multirow import batches, many_rows, row_params
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT
from flowtide.store.sqlcore.params import (
    EncodedCommit,
    Params,
    encode_commit,
    run_params,
    state_params,
)
from flowtide.store.sqlcore.writes import MANY_ROWS, commit_writes

__all__ = [
    "GUARD_FAILED",
    "Creation",
    "Facts",
    "Prepared",
    "check",
    "prepare",
    "read_facts",
    "send_whole",
    "sends_whole",
    "write",
]

GUARD_FAILED = "FT001"
"""The SQLSTATE of a commit sent whole that its guard refused (migration 0006)."""

_ENDED = sorted(ENDED_LIFECYCLES)
_RUNNABLE = sorted(RUNNABLE_LIFECYCLES)
Connection = psycopg.AsyncConnection[Any]


Prepared = EncodedCommit
"""A commit with its parts as parameters, and the errors that wait for their turn."""


def prepare(c: Commit) -> Prepared:
    """``c`` encoded (:func:`flowtide.store.sqlcore.params.encode_commit`)."""
    return encode_commit(c, DIALECT)


@dataclass(slots=True)
class Creation:
    """A run to create, with its first commit (``step``), encoded; and what waits for its turn
    to be raised, in the memory store's order (after the run's id was found free)."""

    run: RunRecord
    lease: Lease | None
    step: Prepared
    row: Params = field(default_factory=dict)
    """The run's row: its record and who holds it."""
    state: list[Params] = field(default_factory=list)
    invalid: ValueError | None = None
    not_json: NotJSONError | None = None
    lease_lost: LeaseLost | None = None

    @classmethod
    def of(
        cls, run: RunRecord, state: Mapping[str, Any], commit: Commit | None, lease: Lease | None
    ) -> Creation:
        made = cls(run, lease, prepare(commit if commit is not None else Commit(run.id)))
        if commit is not None and commit.run_id != run.id:
            made.invalid = ValueError(
                f"a commit of run {commit.run_id!r} cannot create run {run.id!r}"
            )
        elif lease is not None and lease.run_id != run.id:
            made.invalid = ValueError(
                f"a lease on run {lease.run_id!r} cannot create run {run.id!r}"
            )
        try:
            made.row = run_params(run, "run", DIALECT)
            made.state = state_params(run.id, state, DIALECT)
        except NotJSONError as error:
            made.not_json = error
        if commit is not None and commit.lease is not None and commit.lease != lease:
            made.lease_lost = LeaseLost(
                f"run {run.id!r} is created without the lease its commit carries"
            )
        held = (lease.owner, lease.epoch, lease.expires) if lease is not None else (None, 0, None)
        made.row.update(zip(("owner", "epoch", "lease_expires"), held, strict=True))
        made.row["lease_term"] = None  # (the store sets it when its own clock decides)
        made.row["last_seq"] = len(made.step.commit.events)
        return made

    @property
    def may_be_refused(self) -> bool:
        """Whether anything but an id taken already may refuse it (else no check is needed
        before writing: a taken id fails the insert)."""
        c = self.step.commit
        return bool(
            self.invalid
            or self.not_json
            or self.lease_lost
            or self.step.invalid
            or self.step.not_json
            or c.run_lifecycles is not None
            or c.expect
            or c.signal_answers
            or c.requests_answered
        )

    def check(self, facts: Facts) -> None:
        """Raise what keeps the run from being created, in the memory store's order."""
        for error in (self.invalid, self.not_json, self.lease_lost):
            if error is not None:
                raise error
        check(self.step, facts, creating=True)


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
    tokens = None
    if c.expect and not creating:
        ids = list(c.expect)
        tokens = await conn.execute(Q["expected_tokens"], {"run_id": c.run_id, "ids": ids})
    answers = None
    if c.signal_answers:
        keys = [a.key for a in c.signal_answers]
        answers = await conn.execute(Q["answered_keys"], {"keys": keys})
    requests = None
    if c.requests_answered:
        ids = [a.request_id for a in c.requests_answered]
        requests = await conn.execute(Q["unanswered_requests"], {"ids": ids, "run_id": c.run_id})
    deadline = None
    if c.fires_deadline is not None and not creating:
        at = {"run_id": c.run_id, "at": c.fires_deadline}
        deadline = await conn.execute(Q["deadline_check"], at)
    facts = Facts(None)
    if run is not None:
        row = await run.fetchone()
        if row is None:
            return None
        lifecycle, owner, epoch, last_seq = row
        facts = Facts(lifecycle, owner, epoch, last_seq=last_seq)
    if tokens is not None:
        facts.tokens = {r[0]: (r[1], r[2], r[3]) for r in await tokens.fetchall()}
    if answers is not None:
        facts.answered = {r[0] for r in await answers.fetchall()}
    if requests is not None:
        why: dict[str, str | None] = {r[0]: r[1] for r in await requests.fetchall()}
        refused = {a.request_id: why.get(a.request_id, "unknown") for a in c.requests_answered}
        facts.unanswerable = {key: no for key, no in refused.items() if no is not None}
    if deadline is not None:
        clock = await deadline.fetchone()
        assert clock is not None
        facts.clock, facts.request_before = clock
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
        "owner": c.lease.owner if c.lease is not None else None,
        "epoch": c.lease.epoch if c.lease is not None else 0,
        "lifecycles": lifecycles,
    }
    advanced = await conn.execute(Q["advance_run_guarded"], guard)
    if c.expect:
        await conn.execute(Q["expect_tokens_guarded"], _expected(c))
    if c.signal_answers or c.requests_answered:
        answers = {
            "run_id": c.run_id,
            "keys": [a.key for a in c.signal_answers],
            "ids": [a.request_id for a in c.requests_answered],
        }
        await conn.execute(Q["answers_guarded"], answers)
    live = lifecycles is not None and ENDED_LIFECYCLES.isdisjoint(lifecycles)
    await write(conn, p, channel, by_holder=c.lease is not None, ended=False if live else None)
    return advanced


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
        "ids": list(c.expect),
        "statuses": statuses,
        "epochs": [e.epoch for e in wanted],
        "alive": [e.alive_at for e in wanted],
    }
