"""A commit sent whole on PostgreSQL: one statement, its checks made by a guard in the database.

A commit is encoded first, in the caller's task (:func:`prepare`). One whose checks are only its
run's existence, lease (or the lease it takes) and lifecycle, its token expectations, signal keys,
requests and the deadline it fires (an engine's step, a signal's wake, a deadline's firing:
:func:`sends_whole`) is sent as one statement, ``commit_whole``, its parameter the whole commit as
one JSON object (:func:`whole`): the statement checks it, fails if a check does not hold (the
deadline's on the database's clock), and writes it — a transaction of its own, one round trip.
Only the wakes of other runs (a child's end waking its parent) follow it as statements of their
own, in the same transaction. Refused, the commit is then taken the careful way, to tell why (or
to apply it if the run changed in between): its run read first, the checks every store runs,
then the writes (:func:`flowtide.store.sqlcore.commits.apply_commit`, two round trips). So is a
commit the guard cannot check (one refused already by its own parts). A new run with its first
commit is sent whole the same way (``create_whole``: :func:`created`) when only its id taken
already may refuse it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from flowtide.store.base import Commit, Expect
from flowtide.store.postgres.queries import Q
from flowtide.store.postgres.rows import DIALECT
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.params import EncodedCommit, Params, encode_commit
from flowtide.store.sqlcore.script import Statement
from flowtide.store.sqlcore.writes import (
    by_holder,
    last_of_each,
    lifecycles,
    settle_woken,
    settling,
)

__all__ = [
    "GUARD_FAILED",
    "Prepared",
    "Whole",
    "created",
    "creates_whole",
    "prepare",
    "sends_whole",
    "whole",
]

GUARD_FAILED = "FT001"
"""The SQLSTATE of a commit sent whole that its guard refused (migration 0006)."""

Prepared = EncodedCommit
"""A commit with its parts as parameters, and the errors that wait for their turn."""


def prepare(c: Commit) -> Prepared:
    """``c`` encoded (:func:`flowtide.store.sqlcore.params.encode_commit`)."""
    return encode_commit(c, DIALECT)


def sends_whole(p: Prepared) -> bool:
    """Whether ``p`` may be sent whole: nothing but its run's existence, lease, lifecycle,
    token expectations, signal keys, requests answered and the deadline it fires can refuse it
    (the guard of ``commit_whole`` checks those)."""
    c = p.commit
    keys = [a.key for a in c.signal_answers]
    ids = [a.request_id for a in c.requests_answered]
    return not (
        p.invalid
        or p.not_json
        or len(set(keys)) < len(keys)  # (refused: the careful way tells why)
        or len(set(ids)) < len(ids)
    )


@dataclass(frozen=True, slots=True)
class Whole:
    """A commit sent whole: its statement (``commit_whole`` with the parts it needs) and its
    parameters (its row is the seq the commit's events follow), and the statements that follow
    it in its transaction, if any."""

    statement: str
    params: tuple[str, str, str]
    """The commit's JSON, then the lifecycles that have ended and those that are runnable (the
    statement's ``$1``, ``$2``, ``$3``: it is sent as it is, see :func:`_statement`)."""
    then: list[Statement]


def whole(p: Prepared, *, own_clock: bool) -> Whole:
    """``p`` (see :func:`sends_whole`) as ``commit_whole`` sends it. ``own_clock``: a deadline
    it fires is judged on the database's clock (else only against the requests recorded before
    it)."""
    c = p.commit
    settles, tell = settling(p)
    commit: dict[str, Any] = {
        "run_id": c.run_id,
        "event_count": len(c.events),
        "settle": settles,
        "tell": tell,
        "release": c.release,
        "by_holder": by_holder(c),
        "taking": p.take is not None,
        "on_clock": own_clock,
    }
    if p.take is not None:  # (the lease taken, and checked, as the run's counter advances)
        commit["owner"], commit["epoch"] = p.take["owner"], p.take["epoch"]
        commit["now"], commit["term"] = p.take["now"], p.take["term"].total_seconds()
    elif c.lease is not None:
        commit["owner"], commit["epoch"] = c.lease.owner, c.lease.epoch
    if c.run_lifecycles is not None:
        commit["lifecycles"] = sorted(c.run_lifecycles)
    if p.run is not None:
        commit["run"] = p.run
    if c.fires_deadline is not None:
        commit["fires_deadline"] = c.fires_deadline
    rows = _rows(p)
    commit.update(rows)
    parts = _Parts(
        "commit_whole",
        frozenset(rows),
        run=p.run is not None,
        settles=settles,
        due_changed=_due_changed(c),
        ends=p.run is not None and bool(p.run["ended"]),
        fires=c.fires_deadline is not None,
    )
    return _sent(p, parts, commit)


def creates_whole(creation: Creation) -> bool:
    """Whether ``creation`` may be sent whole (:func:`created`): nothing but its id taken
    already may refuse it, and its first commit neither rewrites the run's record, nor takes,
    nor gives back its lease, nor fires a deadline (the careful way's statements do that)."""
    c = creation.step.commit
    return not (
        creation.may_be_refused
        or c.run is not None
        or c.take is not None
        or c.release
        or c.fires_deadline is not None
    )


def created(creation: Creation) -> Whole:
    """A new run and its first commit as ``create_whole`` sends them (see
    :func:`creates_whole`)."""
    p = creation.step
    _, tell = settling(p, settled=True)
    run = dict(creation.row)
    if run["lease_term"] is not None:
        run["lease_term"] = run["lease_term"].total_seconds()
    commit: dict[str, Any] = {
        "run_id": creation.run.id,
        "run": run,
        "tell": tell,
        "by_holder": creation.lease is not None,
    }
    rows = _rows(p, creation.state)
    commit.update(rows)
    parts = _Parts(
        "create_whole",
        frozenset(rows),
        run=False,
        settles=True,
        due_changed=_due_changed(p.commit),
        ends=creation.ended,
        fires=False,
    )
    return _sent(p, parts, commit)


def _sent(p: Prepared, parts: _Parts, commit: dict[str, Any]) -> Whole:
    """The statement of ``parts``, with ``commit`` as its parameter, followed by the wakes of
    other runs ``p`` makes."""
    kinds = lifecycles(DIALECT)
    params = (_JSON.encode(commit), kinds["ended"], kinds["runnable"])
    wakes = [("wake_due", [w | lifecycles(DIALECT) for w in p.wakes])] if p.wakes else []
    return Whole(_statement(parts), params, wakes + settle_woken(p, DIALECT))


def _rows(p: Prepared, state: list[Params] | None = None) -> dict[str, list[Any]]:
    """The rows ``p`` writes, by their names in its JSON (those it has: a part each), with
    ``state`` (a new run's initial state) before its own."""
    c = p.commit
    rows: dict[str, list[Any]] = {
        "tokens": last_of_each(p.tokens),
        "state": last_of_each([*(state or []), *p.state], "key"),
        "state_deleted": list(c.state_deleted),
        "events": p.events,
        "due": last_of_each(p.due, "token_id", "purpose"),
        "due_cleared": list(c.due_cleared),
        "due_dropped": [{"token_id": t, "purpose": purpose} for t, purpose in c.due_dropped],
        "due_fired": p.due_fired,
        "anchors": last_of_each(p.anchors, "placement", "item"),
        "anchors_released": p.anchors_released,
        "scatter": last_of_each(p.scatter, "progress", "index"),
        "parks": last_of_each(p.parks),
        "answers": p.answers,
        "requests": p.requests,
        "expect": _expected(c),
    }
    return {name: found for name, found in rows.items() if found}


def _due_changed(c: Commit) -> bool:
    return bool(c.due or c.due_cleared or c.due_dropped or c.due_fired)


@dataclass(frozen=True, slots=True)
class _Parts:
    """What a commit sent whole holds, as its statement's parts depend on it: the statement it
    is made from (``commit_whole``, ``create_whole``), the rows it has (by their names in its
    JSON), whether it writes its run's record, settles its run, changes its due entries, ends
    it (its run record says so) or fires a deadline."""

    head: str
    rows: frozenset[str]
    run: bool
    settles: bool
    due_changed: bool
    ends: bool
    fires: bool


_WRITES = {
    "state_deleted": "whole_state_deleted",
    "state": "whole_state",
    "tokens": "whole_tokens",
    "events": "whole_events",
    "due": "whole_due",
    "due_ended": "whole_due_ended",
    "anchors_released": "whole_anchors_released",
    "anchors": "whole_anchors",
    "scatter": "whole_scatter",
    "parks": "whole_parks",
    "answers": "whole_answers",
    "requests": "whole_requests",
}
"""The rows a commit writes by a part of its own, and that part, in the order of
:func:`~flowtide.store.sqlcore.writes.commit_writes`: ``due`` for a commit that changes its
run's due entries, ``due_ended`` for one that ends its run without changing them."""

_CHECKS = {
    "expect": "whole_expect",
    "answers": "whole_answers_check",
    "requests": "whole_requests_check",
}
"""The rows a commit is checked by, and the part that checks them."""


@cache
def _statement(parts: _Parts) -> str:
    """``parts.head`` (``commit_whole`` or ``create_whole``) with the parts ``parts`` need,
    each in its place: a slot of the head, ``/*name*/``, and what follows it there if the part
    replaces that (made once for each kind of commit, so that each is prepared once a
    connection)."""
    written = set(parts.rows)
    if parts.due_changed:
        written.add("due")
    elif parts.ends:
        written.add("due_ended")
    writes = [Q[part] for name, part in _WRITES.items() if name in written]
    checks = [Q[part] for name, part in _CHECKS.items() if name in parts.rows]
    if parts.fires:
        checks.append(Q["whole_deadline_check"])
    first_due = "NULL::timestamptz"
    if parts.head == "create_whole" and "due" in parts.rows:
        first_due = Q["whole_first_due_set"]
    elif parts.settles and parts.head == "commit_whole":
        first_due = Q["whole_first_due_changed" if parts.due_changed else "whole_first_due"]
    own_lifecycle = "JOIN LATERAL (SELECT s.lifecycle, s.created_at) AS w ON TRUE"
    slots = {
        "/*due_read*/": Q["whole_due_read"] if parts.due_changed else "",
        "/*first_due*/NULL::timestamptz": first_due,
        f"/*run_read*/{own_lifecycle}": Q["whole_run_read"] if parts.run else own_lifecycle,
        "/*run_write*/": Q["whole_run_write"] if parts.run else "",
        "/*writes*/": " ".join(writes),
        "/*checks*/": " ".join(checks),
        "/*notice*/": Q["whole_notice"] if parts.settles else "",
    }
    unchanged = {"/*first_due*/NULL::timestamptz": "NULL::timestamptz"}
    unchanged[f"/*run_read*/{own_lifecycle}"] = own_lifecycle
    text = Q[parts.head]
    for slot, part in slots.items():
        if slot in text:
            text = text.replace(slot, f" {part} " if part else "")
        elif part != unchanged.get(slot, ""):
            raise ValueError(f"{parts.head} has no place {slot!r}")
    # Its parameters numbered, so that psycopg sends it as it is (a raw cursor) instead of
    # parsing it again at each call (as it does any statement over 4 KB); its spaces shrunk
    # (none of its literals holds two).
    for number, name in enumerate(("commit", "ended", "runnable"), 1):
        text = text.replace(f"%({name})s", f"${number}")
    return " ".join(text.split())


def _expected(c: Commit) -> list[dict[str, Any]]:
    """``c``'s token expectations as ``commit_whole`` checks them."""
    expected = []
    for token_id, e in c.expect.items():
        wanted = e if isinstance(e, Expect) else Expect(e)
        statuses = wanted.status if isinstance(wanted.status, frozenset) else [wanted.status]
        expected.append(
            {
                "id": token_id,
                "statuses": sorted(str(s) for s in statuses),
                "epoch": wanted.epoch,
                "alive_at": wanted.alive_at,
            }
        )
    return expected


def _instant(value: object) -> str:
    """An instant in a commit's JSON (ISO 8601, with its offset)."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")


_JSON = json.JSONEncoder(separators=(",", ":"), default=_instant)
"""(Made once: ``json.dumps`` with options makes an encoder per call.)"""
