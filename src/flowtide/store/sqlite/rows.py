"""Records as the SQLite store's rows, and back: instants as integer microseconds since the Unix
epoch (UTC), JSON values as text (:mod:`flowtide.store.jsonvalues`, with the same pointers in
its errors as the memory store's).

Writing a record gives the named parameters of its statement (a dict); reading a row (a
:class:`sqlite3.Row` of the statement's columns) gives a new record, its JSON values decoded.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RUNNABLE_LIFECYCLES,
    Checkpoint,
    DueEntry,
    EventRecord,
    Lease,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json, encode_json, encode_state
from flowtide.store.records import lineage_of

__all__ = [
    "Params",
    "anchor_item",
    "answer_params",
    "event_params",
    "instant",
    "maybe_instant",
    "maybe_micros",
    "micros",
    "park_params",
    "read_anchor",
    "read_answer",
    "read_due",
    "read_event",
    "read_lease",
    "read_park",
    "read_run",
    "read_scatter_item",
    "read_token",
    "run_params",
    "scatter_params",
    "state_params",
    "token_params",
]

Params = dict[str, Any]
"""The named parameters of one statement."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)


# -- instants ------------


def micros(when: datetime) -> int:
    """``when`` (an aware instant) as microseconds since the Unix epoch."""
    if when.tzinfo is None:
        raise ValueError(f"instant {when!r} has no time zone")
    return (when - EPOCH) // ONE_MICROSECOND


def maybe_micros(when: datetime | None) -> int | None:
    return None if when is None else micros(when)


def instant(us: int) -> datetime:
    """The UTC instant ``us`` microseconds after the Unix epoch."""
    return EPOCH + timedelta(microseconds=us)


def maybe_instant(us: int | None) -> datetime | None:
    return None if us is None else instant(us)


# -- runs ------------


def run_params(run: RunRecord, where: str) -> Params:
    """The columns of a run record (``where``: the record's place in a commit, for the pointer
    of a :class:`~flowtide.store.jsonvalues.NotJSONError`)."""
    checkpoint = run.checkpoint.to_json() if run.checkpoint is not None else None
    return {
        "id": run.id,
        "flow_id": run.flow_id,
        "flow_version": run.flow_version,
        "lifecycle": run.lifecycle,
        "ended": run.lifecycle in ENDED_LIFECYCLES,
        "runnable": run.lifecycle in RUNNABLE_LIFECYCLES,
        "created_at": micros(run.created_at),
        "deadline": maybe_micros(run.deadline),
        "started_at": maybe_micros(run.started_at),
        "finished_at": maybe_micros(run.finished_at),
        "parent_run_id": run.parent_run_id,
        "parent_token_id": run.parent_token_id,
        "depth": run.depth,
        "outcome": run.outcome,
        "options": encode_json(run.options, f"{where}/options"),
        "result": encode_json(run.result, f"{where}/result"),
        "checkpoint": encode_json(checkpoint, f"{where}/checkpoint"),
    }


def read_run(row: sqlite3.Row) -> RunRecord:
    checkpoint = decode_json(row["checkpoint"])
    return RunRecord(
        id=row["id"],
        flow_id=row["flow_id"],
        flow_version=row["flow_version"],
        lifecycle=row["lifecycle"],
        created_at=instant(row["created_at"]),
        deadline=maybe_instant(row["deadline"]),
        started_at=maybe_instant(row["started_at"]),
        finished_at=maybe_instant(row["finished_at"]),
        parent_run_id=row["parent_run_id"],
        parent_token_id=row["parent_token_id"],
        depth=row["depth"],
        outcome=row["outcome"],
        result=decode_json(row["result"]),
        options=decode_json(row["options"]),
        checkpoint=Checkpoint.from_json(checkpoint) if checkpoint is not None else None,
    )


def state_params(run_id: str, state: Mapping[str, Any]) -> list[Params]:
    """One row per top-level key, its value as JSON (a key that is not a string is refused)."""
    encoded = encode_state(state)
    return [{"run_id": run_id, "key": key, "value": text} for key, text in encoded.items()]


# -- tokens and events ------------


def token_params(run_id: str, token: TokenRecord, where: str) -> Params:
    return {
        "run_id": run_id,
        "id": token.id,
        "placement": token.placement,
        "status": str(token.status),
        "attempt": token.attempt,
        "visit": token.visit,
        "lineage": json.dumps(lineage_of(token.lineage), separators=(",", ":")),
        "deadline": maybe_micros(token.deadline),
        "due": maybe_micros(token.due),
        "created_at": maybe_micros(token.created_at),
        "data": encode_json(token.data, f"{where}/data"),
        "epoch": token.epoch,
    }


def read_token(row: sqlite3.Row) -> TokenRecord:
    return TokenRecord(
        id=row["id"],
        run_id=row["run_id"],
        placement=row["placement"],
        status=TokenStatus(row["status"]),
        attempt=row["attempt"],
        visit=row["visit"],
        lineage=lineage_of(json.loads(row["lineage"])),
        deadline=maybe_instant(row["deadline"]),
        due=maybe_instant(row["due"]),
        created_at=maybe_instant(row["created_at"]),
        data=decode_json(row["data"]),
        epoch=row["epoch"],
    )


def event_params(run_id: str, event: EventRecord, where: str) -> Params:
    """An event's columns but its ``seq`` (numbered when the commit is applied)."""
    return {
        "run_id": run_id,
        "kind": event.kind,
        "at": micros(event.at),
        "placement": event.placement,
        "attempt": event.attempt,
        "token_id": event.token_id,
        "data": encode_json(event.data, f"{where}/data"),
    }


def read_event(row: sqlite3.Row) -> EventRecord:
    return EventRecord(
        kind=row["kind"],
        run_id=row["run_id"],
        at=instant(row["at"]),
        placement=row["placement"],
        attempt=row["attempt"],
        token_id=row["token_id"],
        data=decode_json(row["data"]),
        seq=row["seq"],
    )


def read_due(run_id: str, row: sqlite3.Row) -> DueEntry:
    return DueEntry(instant(row["due_at"]), run_id, row["token_id"], row["purpose"])


def read_lease(row: sqlite3.Row) -> Lease:
    return Lease(row["id"], row["owner"], row["epoch"], instant(row["lease_expires"]))


# -- what parking and scatters keep ------------


def anchor_item(item: str | None) -> str:
    """A node anchor's item as its key column: JSON text (``null`` when it has none), so that
    every anchor has a key a unique index can tell apart."""
    return json.dumps(item)


def read_anchor(row: sqlite3.Row) -> NodeAnchor:
    return NodeAnchor(row["run_id"], row["placement"], json.loads(row["item"]), instant(row["at"]))


def park_params(park: ParkRecord, where: str) -> Params:
    return {
        "id": park.id,
        "run_id": park.run_id,
        "token_id": park.token_id,
        "placement": park.placement,
        "visit": park.visit,
        "epoch": park.epoch,
        "parked_at": micros(park.parked_at),
        "deadline": maybe_micros(park.deadline),
        "key": park.key,
        "payload": encode_json(park.payload, f"{where}/payload"),
        "status": str(park.status),
        "closed_at": maybe_micros(park.closed_at),
        "closed_by": park.closed_by,
    }


def read_park(row: sqlite3.Row) -> ParkRecord:
    return ParkRecord(
        id=row["id"],
        run_id=row["run_id"],
        token_id=row["token_id"],
        placement=row["placement"],
        visit=row["visit"],
        epoch=row["epoch"],
        parked_at=instant(row["parked_at"]),
        deadline=maybe_instant(row["deadline"]),
        key=row["key"],
        payload=decode_json(row["payload"]),
        status=ParkStatus(row["status"]),
        closed_at=maybe_instant(row["closed_at"]),
        closed_by=row["closed_by"],
    )


def scatter_params(item: ScatterItemRecord, where: str) -> Params:
    return {
        "run_id": item.run_id,
        "progress": item.progress,
        "idx": item.index,
        "status": item.status,
        "output": item.output,
        "result": encode_json(item.result, f"{where}/result"),
        "key": encode_json(item.key, f"{where}/key"),
        "completion": item.order,
    }


def read_scatter_item(row: sqlite3.Row) -> ScatterItemRecord:
    return ScatterItemRecord(
        run_id=row["run_id"],
        progress=row["progress"],
        index=row["idx"],
        status=row["status"],
        output=row["output"],
        result=decode_json(row["result"]),
        key=decode_json(row["key"]),
        order=row["completion"],
    )


def answer_params(answer: SignalAnswer, where: str) -> Params:
    return {
        "key": answer.key,
        "run_id": answer.run_id,
        "answer": encode_json(answer.answer, f"{where}/answer"),
    }


def read_answer(row: sqlite3.Row) -> SignalAnswer:
    return SignalAnswer(row["key"], row["run_id"], decode_json(row["answer"]))
