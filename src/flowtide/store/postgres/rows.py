"""Records as the PostgreSQL store's statements take them (parameters) and give them back (rows).

What is kept as JSON is encoded with :func:`~flowtide.store.jsonvalues.encode_json`, named by
the same pointers the memory store gives (``run/options``, ``tokens/0/data``, ``state/<key>``,
...), and read back with :func:`~flowtide.store.jsonvalues.decode_json`: new objects on every
read. Column order in the rows is the order of the ``SELECT`` lists of ``queries.sql``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    Checkpoint,
    EventRecord,
    Lease,
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
    "answer_params",
    "event_of_row",
    "event_params",
    "json_text",
    "lease_of_row",
    "park_of_row",
    "park_params",
    "run_of_row",
    "run_params",
    "scatter_of_row",
    "scatter_params",
    "state_params",
    "token_of_row",
    "token_params",
]

Params = dict[str, Any]
"""The parameters of one statement, by name."""
Row = Sequence[Any]


# -- records to parameters ------------


def json_text(value: Any, where: str) -> str:
    """``value`` as JSON text (:func:`~flowtide.store.jsonvalues.encode_json`), fit for the
    database: a string holding a lone surrogate (which no UTF-8 text can carry) is written
    with JSON's escapes instead, and reads back the same."""
    text = encode_json(value, where)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
    return text


def run_params(run: RunRecord, where: str) -> Params:
    checkpoint = run.checkpoint.to_json() if run.checkpoint is not None else None
    return {
        "id": run.id,
        "flow_id": run.flow_id,
        "flow_version": run.flow_version,
        "lifecycle": run.lifecycle,
        "created_at": run.created_at,
        "deadline": run.deadline,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "parent_run_id": run.parent_run_id,
        "parent_token_id": run.parent_token_id,
        "depth": run.depth,
        "outcome": run.outcome,
        "options": json_text(run.options, f"{where}/options"),
        "result": json_text(run.result, f"{where}/result"),
        "checkpoint": json_text(checkpoint, f"{where}/checkpoint"),
    }


def token_params(run_id: str, token: TokenRecord, where: str) -> Params:
    return {
        "run_id": run_id,
        "id": token.id,
        "placement": token.placement,
        "status": str(token.status),
        "attempt": token.attempt,
        "visit": token.visit,
        "lineage": json.dumps([list(split) for split in lineage_of(token.lineage)]),
        "deadline": token.deadline,
        "due": token.due,
        "created_at": token.created_at,
        "data": json_text(token.data, f"{where}/data"),
        "epoch": token.epoch,
    }


def state_params(run_id: str, state: Mapping[str, Any]) -> list[Params]:
    """One row per top-level key, its value as JSON (a key that is not a string is refused)."""
    encoded = encode_state(state, json_text)
    return [{"run_id": run_id, "key": key, "value": text} for key, text in encoded.items()]


def event_params(run_id: str, event: EventRecord, where: str) -> Params:
    return {
        "run_id": run_id,
        "kind": event.kind,
        "at": event.at,
        "placement": event.placement,
        "attempt": event.attempt,
        "token_id": event.token_id,
        "data": json_text(event.data, f"{where}/data"),
    }


def scatter_params(item: ScatterItemRecord, where: str) -> Params:
    return {
        "run_id": item.run_id,
        "progress": item.progress,
        "index": item.index,
        "status": item.status,
        "output": item.output,
        "result": json_text(item.result, f"{where}/result"),
        "key": json_text(item.key, f"{where}/key"),
        "order": item.order,
    }


def park_params(park: ParkRecord, where: str) -> Params:
    return {
        "id": park.id,
        "run_id": park.run_id,
        "token_id": park.token_id,
        "placement": park.placement,
        "visit": park.visit,
        "epoch": park.epoch,
        "parked_at": park.parked_at,
        "deadline": park.deadline,
        "key": park.key,
        "payload": json_text(park.payload, f"{where}/payload"),
        "status": str(park.status),
        "closed_at": park.closed_at,
        "closed_by": park.closed_by,
    }


def answer_params(answer: SignalAnswer, where: str) -> Params:
    return {
        "key": answer.key,
        "run_id": answer.run_id,
        "answer": json_text(answer.answer, f"{where}/answer"),
    }


# -- rows to records ------------


def run_of_row(row: Row) -> RunRecord:
    checkpoint = decode_json(row[14])
    return RunRecord(
        id=row[0],
        flow_id=row[1],
        flow_version=row[2],
        lifecycle=row[3],
        created_at=row[4],
        deadline=row[5],
        started_at=row[6],
        finished_at=row[7],
        parent_run_id=row[8],
        parent_token_id=row[9],
        depth=row[10],
        outcome=row[11],
        result=decode_json(row[12]),
        options=decode_json(row[13]),
        checkpoint=Checkpoint.from_json(checkpoint) if checkpoint is not None else None,
    )


def token_of_row(run_id: str, row: Row) -> TokenRecord:
    return TokenRecord(
        id=row[0],
        run_id=run_id,
        placement=row[1],
        status=TokenStatus(row[2]),
        attempt=row[3],
        visit=row[4],
        lineage=lineage_of(json.loads(row[5])),
        deadline=row[6],
        due=row[7],
        created_at=row[8],
        data=decode_json(row[9]),
        epoch=row[10],
    )


def event_of_row(run_id: str, row: Row) -> EventRecord:
    return EventRecord(
        kind=row[1],
        run_id=run_id,
        at=row[2],
        placement=row[3],
        attempt=row[4],
        token_id=row[5],
        data=decode_json(row[6]),
        seq=row[0],
    )


def park_of_row(row: Row) -> ParkRecord:
    return ParkRecord(
        id=row[0],
        run_id=row[1],
        token_id=row[2],
        placement=row[3],
        visit=row[4],
        epoch=row[5],
        parked_at=row[6],
        deadline=row[7],
        key=row[8],
        payload=decode_json(row[9]),
        status=ParkStatus(row[10]),
        closed_at=row[11],
        closed_by=row[12],
    )


def scatter_of_row(row: Row) -> ScatterItemRecord:
    return ScatterItemRecord(
        run_id=row[0],
        progress=row[1],
        index=row[2],
        status=row[3],
        output=row[4],
        result=decode_json(row[5]),
        key=decode_json(row[6]),
        order=row[7],
    )


def lease_of_row(row: Row) -> Lease | None:
    """The lease of a ``(run id, owner, epoch, expiry)`` row; None if nobody holds the run."""
    run_id, owner, epoch, expires = row
    if owner is None:
        return None
    assert isinstance(expires, datetime)
    return Lease(run_id, owner, epoch, expires)
