"""A commit's records as the named parameters of the SQL stores' statements, one set of names
for every store: each store's :class:`Dialect` says how an instant, a JSON value, a list and an
anchor's item are bound in its database.

A commit is encoded whole (:func:`encode_commit`) in the caller's task, before anything is sent
to the database: what the caller changes afterwards changes nothing. A value that cannot be
encoded (one that is not JSON) is kept as :attr:`EncodedCommit.not_json`, raised once the
commit's checks have passed (:func:`flowtide.store.checks.check_commit`), as the memory store
does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flowtide.store.base import ENDED_LIFECYCLES, RUNNABLE_LIFECYCLES
from flowtide.store.checks import foreign_run
from flowtide.store.jsonvalues import encode_state
from flowtide.store.records import (
    Commit,
    DueEntry,
    EventRecord,
    ParkRecord,
    RequestAnswer,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    TokenRecord,
    lineage_of,
)

__all__ = [
    "Dialect",
    "EncodedCommit",
    "Params",
    "answer_params",
    "encode_commit",
    "event_params",
    "park_params",
    "run_params",
    "scatter_params",
    "state_params",
    "token_params",
]

Params = dict[str, Any]
"""The named parameters of one statement."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database takes what the statements bind."""

    instant: Callable[[datetime], Any]
    """An aware instant."""
    json: Callable[[Any, str], str]
    """A value as JSON text (the second argument: its pointer, for the error if it is not
    JSON)."""
    array: Callable[[list[str]], Any]
    """A list of strings, as one parameter."""
    anchor_item: Callable[[str | None], Any]
    """A node anchor's item, as its key."""
    duration: Callable[[timedelta], Any]
    """A span of time (a lease's term)."""
    read_instant: Callable[[Any], datetime]
    """An instant as a row holds it, read back."""
    read_anchor_item: Callable[[Any], str | None]
    """A node anchor's item as a row holds it, read back."""

    def maybe_instant(self, when: datetime | None) -> Any:
        return None if when is None else self.instant(when)

    def maybe_read_instant(self, value: Any) -> datetime | None:
        return None if value is None else self.read_instant(value)


def run_params(run: RunRecord, where: str, d: Dialect) -> Params:
    """The columns of a run record (``where``: its place in a commit, for errors)."""
    checkpoint = run.checkpoint.to_json() if run.checkpoint is not None else None
    return {
        "id": run.id,
        "flow_id": run.flow_id,
        "flow_version": run.flow_version,
        "lifecycle": run.lifecycle,
        "ended": run.lifecycle in ENDED_LIFECYCLES,
        "runnable": run.lifecycle in RUNNABLE_LIFECYCLES,
        "created_at": d.instant(run.created_at),
        "deadline": d.maybe_instant(run.deadline),
        "started_at": d.maybe_instant(run.started_at),
        "finished_at": d.maybe_instant(run.finished_at),
        "parent_run_id": run.parent_run_id,
        "parent_token_id": run.parent_token_id,
        "depth": run.depth,
        "outcome": run.outcome,
        "options": d.json(run.options, f"{where}/options"),
        "result": d.json(run.result, f"{where}/result"),
        "checkpoint": d.json(checkpoint, f"{where}/checkpoint"),
    }


def state_params(run_id: str, state: Mapping[str, Any], d: Dialect) -> list[Params]:
    """One row per top-level key, its value as JSON (a key that is not a string is refused)."""
    encoded = encode_state(state, d.json)
    return [{"run_id": run_id, "key": key, "value": text} for key, text in encoded.items()]


def token_params(run_id: str, token: TokenRecord, where: str, d: Dialect) -> Params:
    return {
        "run_id": run_id,
        "id": token.id,
        "placement": token.placement,
        "status": str(token.status),
        "attempt": token.attempt,
        "visit": token.visit,
        "lineage": _LINEAGE.encode(lineage_of(token.lineage)) if token.lineage else "[]",
        "deadline": d.maybe_instant(token.deadline),
        "due": d.maybe_instant(token.due),
        "created_at": d.maybe_instant(token.created_at),
        "data": d.json(token.data, f"{where}/data"),
        "epoch": token.epoch,
    }


_LINEAGE = json.JSONEncoder(separators=(",", ":"))
"""(Made once: ``json.dumps`` with options makes an encoder per call.)"""


def event_params(run_id: str, event: EventRecord, where: str, d: Dialect) -> Params:
    """An event's columns but its ``seq`` (numbered from its run's counter when written)."""
    return {
        "run_id": run_id,
        "kind": event.kind,
        "at": d.instant(event.at),
        "placement": event.placement,
        "attempt": event.attempt,
        "token_id": event.token_id,
        "data": d.json(event.data, f"{where}/data"),
    }


def scatter_params(item: ScatterItemRecord, where: str, d: Dialect) -> Params:
    return {
        "run_id": item.run_id,
        "progress": item.progress,
        "index": item.index,
        "status": item.status,
        "output": item.output,
        "result": d.json(item.result, f"{where}/result"),
        "key": d.json(item.key, f"{where}/key"),
        "order": item.order,
    }


def park_params(park: ParkRecord, where: str, d: Dialect) -> Params:
    return {
        "id": park.id,
        "run_id": park.run_id,
        "token_id": park.token_id,
        "placement": park.placement,
        "visit": park.visit,
        "epoch": park.epoch,
        "parked_at": d.instant(park.parked_at),
        "deadline": d.maybe_instant(park.deadline),
        "key": park.key,
        "payload": d.json(park.payload, f"{where}/payload"),
        "status": str(park.status),
        "closed_at": d.maybe_instant(park.closed_at),
        "closed_by": park.closed_by,
    }


def answer_params(answer: SignalAnswer, where: str, d: Dialect) -> Params:
    return {
        "key": answer.key,
        "run_id": answer.run_id,
        "answer": d.json(answer.answer, f"{where}/answer"),
    }


def request_answer_params(answer: RequestAnswer, where: str, d: Dialect) -> Params:
    return {
        "id": answer.request_id,
        "answer": d.json(answer.answer, f"{where}/answer"),
        "answered_at": d.instant(answer.at),
    }


def due_params(run_id: str, entries: Sequence[DueEntry], d: Dialect) -> list[Params]:
    return [
        {
            "run_id": run_id,
            "token_id": e.token_id,
            "purpose": e.purpose,
            "due_at": d.instant(e.when),
        }
        for e in entries
    ]


@dataclass(slots=True)
class EncodedCommit:
    """A commit with its parts as parameters, and the errors that wait for their turn."""

    commit: Commit
    invalid: ValueError | None = None
    """The commit carries another run's record (raised once its run is known)."""
    not_json: Exception | None = None
    """Why a part could not be encoded (raised once every other check passed)."""
    run: Params | None = None
    tokens: list[Params] = field(default_factory=list)
    state: list[Params] = field(default_factory=list)
    events: list[Params] = field(default_factory=list)
    scatter: list[Params] = field(default_factory=list)
    parks: list[Params] = field(default_factory=list)
    answers: list[Params] = field(default_factory=list)
    requests: list[Params] = field(default_factory=list)
    due: list[Params] = field(default_factory=list)
    due_fired: list[Params] = field(default_factory=list)
    wakes: list[Params] = field(default_factory=list)
    anchors: list[Params] = field(default_factory=list)
    anchors_released: list[Params] = field(default_factory=list)
    take: Params | None = None
    """The lease the commit takes (:attr:`~flowtide.store.records.Commit.take`): ``now`` set
    to None by a store that holds it from its own clock."""


def encode_commit(c: Commit, d: Dialect) -> EncodedCommit:
    """``c``'s parts as parameters, in the order the memory store encodes them (so that the
    first value refused is the same)."""
    p = EncodedCommit(c, invalid=foreign_run(c))
    run_id = c.run_id
    if c.take is not None:
        lease, now = c.take.lease, c.take.now
        p.take = {
            "run_id": run_id,
            "owner": lease.owner,
            "epoch": lease.epoch,
            "expires": d.instant(lease.expires),
            "now": d.instant(now),
            "term": d.duration(lease.expires - now),
        }
    # (Most commits carry a token, an event or two and little else: a part a commit does not
    # carry is left as the empty list it is.)
    try:
        p.run = run_params(c.run, "run", d) if c.run is not None else None
        p.tokens = [token_params(run_id, t, f"tokens/{i}", d) for i, t in enumerate(c.tokens)]
        if c.state:
            p.state = state_params(run_id, c.state, d)
        p.events = [event_params(run_id, e, f"events/{i}", d) for i, e in enumerate(c.events)]
        if c.scatter:
            p.scatter = [scatter_params(s, f"scatter/{i}", d) for i, s in enumerate(c.scatter)]
        if c.parks:
            p.parks = [park_params(k, f"parks/{i}", d) for i, k in enumerate(c.parks)]
        if c.signal_answers:
            p.answers = [
                answer_params(a, f"signal_answers/{i}", d) for i, a in enumerate(c.signal_answers)
            ]
        if c.requests_answered:
            p.requests = [
                request_answer_params(a, f"requests_answered/{i}", d)
                for i, a in enumerate(c.requests_answered)
            ]
        if c.due:
            p.due = due_params(run_id, c.due, d)
        if c.due_fired:
            p.due_fired = due_params(run_id, c.due_fired, d)
        if c.wakes:
            p.wakes = [due_params(e.run_id, [e], d)[0] for e in c.wakes]
        if c.anchors:
            p.anchors = [
                {
                    "run_id": a.run_id,
                    "placement": a.placement,
                    "item": d.anchor_item(a.item),
                    "at": d.instant(a.at),
                }
                for a in c.anchors
            ]
        if c.anchors_released:
            p.anchors_released = [
                {"run_id": run_id, "placement": placement, "item": d.anchor_item(item)}
                for placement, item in c.anchors_released
            ]
    except Exception as error:  # (reported after the commit's checks, as the memory store does)
        p.not_json = error
    return p
