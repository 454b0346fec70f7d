"""One commit as the PostgreSQL store applies it, in one transaction: one round trip when it
can be sent whole, two when its run must be read first.

1. **Prepared** (no database): every value kept as JSON is encoded (:func:`prepare`). A value
   that is not JSON is not raised yet: the memory store, the reference, refuses a commit for a
   conflict before it looks at its values, so the error waits for its turn.
2. **Sent whole** (:func:`sends_whole`, :func:`send_whole`): a commit whose checks are only its
   run's existence, lease and lifecycle (an engine's step) is sent with its writes and the
   ``COMMIT`` in one pipeline, behind a guard statement that fails the transaction if they do
   not hold. Then the commit is taken the careful way, to tell why (or to apply it if the run
   changed back in between).
3. **The careful way**: the facts (first round trip): the run's row locked and its history
   counter advanced, the tokens the commit expects, which of its signal keys are answered
   already (:func:`read_facts`); the checks (:func:`flowtide.store.checks.check_commit`, as
   every store runs them); the writes (:func:`write`, second round trip, with the ``COMMIT``).
4. **Writes**: the parts in the contract's order, the events numbered from the run's counter,
   then ``settle_run``: the release, the wake instant and the notice to other processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RUNNABLE_LIFECYCLES,
    Commit,
    Lease,
    LeaseLost,
    RunRecord,
)
from flowtide.store.checks import RunFacts, check_commit, foreign_run
from flowtide.store.jsonvalues import NotJSONError
from flowtide.store.multirow import batches, many_rows, row_params
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import (
    Params,
    answer_params,
    event_params,
    json_text,
    park_params,
    run_params,
    scatter_params,
    state_params,
    token_params,
)

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


@dataclass(slots=True)
class Prepared:
    """A commit with what it keeps as JSON encoded, and the errors that wait for their turn."""

    commit: Commit
    invalid: ValueError | None = None
    """The commit carries another run's record (raised once the run is known)."""
    not_json: NotJSONError | None = None
    """A value is not JSON (raised once every other check passed)."""
    run: Params | None = None
    tokens: list[Params] = field(default_factory=list)
    state: list[Params] = field(default_factory=list)
    events: list[Params] = field(default_factory=list)
    scatter: list[Params] = field(default_factory=list)
    parks: list[Params] = field(default_factory=list)
    answers: list[Params] = field(default_factory=list)
    requests: list[Params] = field(default_factory=list)


def prepare(c: Commit) -> Prepared:
    """``c`` encoded, in the order the memory store encodes it (the first value that is not
    JSON is the one reported)."""
    p = Prepared(c)
    p.invalid = foreign_run(c)
    try:
        p.run = run_params(c.run, "run") if c.run is not None else None
        p.tokens = [token_params(c.run_id, t, f"tokens/{i}") for i, t in enumerate(c.tokens)]
        p.state = state_params(c.run_id, c.state or {})
        p.events = [event_params(c.run_id, e, f"events/{i}") for i, e in enumerate(c.events)]
        p.scatter = [scatter_params(s, f"scatter/{i}") for i, s in enumerate(c.scatter)]
        p.parks = [park_params(k, f"parks/{i}") for i, k in enumerate(c.parks)]
        p.answers = [
            answer_params(a, f"signal_answers/{i}") for i, a in enumerate(c.signal_answers)
        ]
        p.requests = [
            {
                "id": a.request_id,
                "answer": json_text(a.answer, f"requests_answered/{i}/answer"),
                "answered_at": a.at,
            }
            for i, a in enumerate(c.requests_answered)
        ]
    except NotJSONError as error:
        p.not_json = error
    return p


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
            made.row = run_params(run, "run")
            made.state = state_params(run.id, state)
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
    """Whether ``p`` may be sent whole: nothing but its run's existence, lease and lifecycle
    can refuse it (the guard of :func:`send_whole` checks those)."""
    c = p.commit
    return not (
        p.invalid
        or p.not_json
        or c.expect
        or c.signal_answers
        or c.requests_answered
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
    await write(conn, p, channel, by_holder=c.lease is not None)
    return advanced


async def write(conn: Connection, p: Prepared, channel: str, *, by_holder: bool) -> None:
    """Queue the writes of a checked commit (they run when the pipeline next syncs), its events
    numbered from its run's counter (advanced already). ``by_holder``: the commit comes from the
    run's holder (it was made under the run's lease), who needs no notice of what it changed
    itself."""
    c = p.commit
    run_id = c.run_id
    cursor = conn.cursor()
    if p.run is not None:
        await cursor.execute(Q["write_run"], p.run)
    await _insert(cursor, "put_token", _last_of_each(p.tokens))
    await _insert(cursor, "put_state", p.state)
    if c.state_deleted:
        await cursor.execute(Q["delete_state"], {"run_id": run_id, "keys": list(c.state_deleted)})
    for back, params in enumerate(reversed(p.events)):
        params["back"] = back
    await _insert(cursor, "insert_event", p.events)
    ending = c.run is not None and c.run.lifecycle in ENDED_LIFECYCLES
    if ending:
        await cursor.execute(Q["delete_all_due"], {"run_id": run_id})
    else:
        await _write_due(cursor, c)
    await _write_kept(cursor, p)
    await cursor.execute(
        Q["settle_run"],
        {
            "run_id": run_id,
            "release": c.release,
            "ended": _ENDED,
            "runnable": _RUNNABLE,
            "channel": channel,
            "payload": run_id[:200],
            # (who waits elsewhere for an answer or for the run's end is told at once)
            "tell": bool(p.answers or p.requests) or ending,
            "by_holder": by_holder,
        },
    )


async def _write_due(cursor: psycopg.AsyncCursor[Any], c: Commit) -> None:
    """Due entries cleared by token, dropped by purpose, fired (as they were), then set."""
    run_id = c.run_id
    if c.due_cleared:
        await cursor.execute(Q["clear_due"], {"run_id": run_id, "token_ids": list(c.due_cleared)})
    if c.due_dropped:
        await _each(
            cursor,
            Q["drop_due"],
            [{"run_id": run_id, "token_id": t, "purpose": p} for t, p in c.due_dropped],
        )
    if c.due_fired:
        await _each(
            cursor,
            Q["fire_due"],
            [
                {"run_id": run_id, "token_id": e.token_id, "purpose": e.purpose, "due_at": e.when}
                for e in c.due_fired
            ],
        )
    if c.due:
        await _each(
            cursor,
            Q["set_due"],
            [
                {"run_id": run_id, "token_id": e.token_id, "purpose": e.purpose, "due_at": e.when}
                for e in c.due
            ],
        )
        live = c.run is not None or (
            c.run_lifecycles is not None and c.run_lifecycles.isdisjoint(ENDED_LIFECYCLES)
        )
        if not live:  # (an ended run keeps no due entry)
            await cursor.execute(Q["delete_due_if_ended"], {"run_id": run_id, "ended": _ENDED})


async def _write_kept(cursor: psycopg.AsyncCursor[Any], p: Prepared) -> None:
    """Node anchors stored then released, scatter items, parks, signal answers."""
    c = p.commit
    if c.anchors:
        await _each(
            cursor,
            Q["put_anchor"],
            [
                {"run_id": a.run_id, "placement": a.placement, "item": a.item, "at": a.at}
                for a in c.anchors
            ],
        )
    if c.anchors_released:
        await _each(
            cursor,
            Q["release_anchor"],
            [
                {"run_id": c.run_id, "placement": placement, "item": item}
                for placement, item in c.anchors_released
            ],
        )
    if p.scatter:
        await _each(cursor, Q["put_scatter_item"], p.scatter)
    if p.parks:
        await _each(cursor, Q["put_park"], p.parks)
    if p.answers:
        # In key order, as every commit takes them: two commits answering the same keys wait
        # for one another instead of deadlocking.
        answers: list[Params] = sorted(p.answers, key=_key)
        await _each(cursor, Q["insert_answer"], answers)
    if p.requests:
        await _each(cursor, Q["answer_request"], p.requests)


def _key(params: Params) -> str:
    return str(params["key"])


async def _each(cursor: psycopg.AsyncCursor[Any], query: str, rows: list[Params]) -> None:
    """Run ``query`` once per row (one row alone: as a plain statement, which costs less)."""
    if len(rows) == 1:
        await cursor.execute(query, rows[0])
    else:
        await cursor.executemany(query, rows)


async def _insert(cursor: psycopg.AsyncCursor[Any], name: str, rows: Sequence[Params]) -> None:
    """Insert ``rows`` with statement ``name``, many rows a statement."""
    for batch in batches(rows):
        if len(batch) == 1:
            await cursor.execute(Q[name], batch[0])
        else:
            await cursor.execute(many_rows(Q[name], len(batch)), row_params(batch))


def _last_of_each(tokens: list[Params]) -> list[Params]:
    """Each token once, as last written, in the place it was first written (one statement may
    not update a row twice)."""
    last: dict[str, Params] = {}
    for params in tokens:
        last[params["id"]] = params
    return list(last.values())
