"""Rows of the SQL stores' statements as records: one decoder for SQLite and PostgreSQL.

The columns agree in order and in kind but for two things each backend's :class:`Dialect`
says: instants (SQLite keeps integer microseconds since the Unix epoch, PostgreSQL
``timestamptz``, given back as aware datetimes) and a node anchor's item (SQLite keeps it as
JSON text, so that a unique key tells ``null`` apart; PostgreSQL as it is, beside a key
column). JSON values are text in both: SQLite's columns are ``TEXT``, and PostgreSQL's
connections read ``json`` as its text (so both decode with
:func:`~flowtide.store.jsonvalues.decode_json`, new objects on every read).
"""

from __future__ import annotations

import json

from flowtide.store.base import (
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
    SignalRequest,
    StoredFlowVersion,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.records import lineage_of
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect

__all__ = [
    "anchor_of_row",
    "answer_of_row",
    "due_of_row",
    "event_of_row",
    "flow_version_of_row",
    "lease_of_row",
    "park_of_row",
    "request_of_row",
    "run_of_row",
    "scatter_of_row",
    "token_of_row",
]


def run_of_row(row: Row, d: Dialect) -> RunRecord:
    checkpoint = decode_json(row[14])
    return RunRecord(
        id=row[0],
        flow_id=row[1],
        flow_version=row[2],
        lifecycle=row[3],
        created_at=d.read_instant(row[4]),
        deadline=d.maybe_read_instant(row[5]),
        started_at=d.maybe_read_instant(row[6]),
        finished_at=d.maybe_read_instant(row[7]),
        parent_run_id=row[8],
        parent_token_id=row[9],
        depth=row[10],
        outcome=row[11],
        result=decode_json(row[12]),
        options=decode_json(row[13]),
        checkpoint=Checkpoint.from_json(checkpoint) if checkpoint is not None else None,
    )


def token_of_row(run_id: str, row: Row, d: Dialect) -> TokenRecord:
    return TokenRecord(
        id=row[0],
        run_id=run_id,
        placement=row[1],
        status=TokenStatus(row[2]),
        attempt=row[3],
        visit=row[4],
        lineage=lineage_of(json.loads(row[5])),
        deadline=d.maybe_read_instant(row[6]),
        due=d.maybe_read_instant(row[7]),
        created_at=d.maybe_read_instant(row[8]),
        data=decode_json(row[9]),
        epoch=row[10],
    )


def event_of_row(run_id: str, row: Row, d: Dialect) -> EventRecord:
    return EventRecord(
        kind=row[1],
        run_id=run_id,
        at=d.read_instant(row[2]),
        placement=row[3],
        attempt=row[4],
        token_id=row[5],
        data=decode_json(row[6]),
        seq=row[0],
    )


def due_of_row(run_id: str, row: Row, d: Dialect) -> DueEntry:
    return DueEntry(d.read_instant(row[0]), run_id, row[1], row[2])


def anchor_of_row(run_id: str, row: Row, d: Dialect) -> NodeAnchor:
    return NodeAnchor(run_id, row[0], d.read_anchor_item(row[1]), d.read_instant(row[2]))


def park_of_row(row: Row, d: Dialect) -> ParkRecord:
    return ParkRecord(
        id=row[0],
        run_id=row[1],
        token_id=row[2],
        placement=row[3],
        visit=row[4],
        epoch=row[5],
        parked_at=d.read_instant(row[6]),
        deadline=d.maybe_read_instant(row[7]),
        key=row[8],
        payload=decode_json(row[9]),
        status=ParkStatus(row[10]),
        closed_at=d.maybe_read_instant(row[11]),
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


def answer_of_row(row: Row) -> SignalAnswer:
    return SignalAnswer(row[0], row[1], decode_json(row[2]))


def request_of_row(row: Row, d: Dialect) -> SignalRequest:
    request_id, run_id, requested_at, request, answer, answered_at = row
    return SignalRequest(
        request_id,
        run_id,
        d.read_instant(requested_at),
        decode_json(request),
        decode_json(answer) if answer is not None else None,
        d.maybe_read_instant(answered_at),
    )


def lease_of_row(row: Row, d: Dialect) -> Lease | None:
    """The lease of a ``(run id, owner, epoch, expiry[, taken from])`` row; None if nobody
    holds the run."""
    if row[1] is None:
        return None
    taken_from = row[4] if len(row) > 4 else None
    return Lease(row[0], row[1], row[2], d.read_instant(row[3]), taken_from)


def flow_version_of_row(row: Row, d: Dialect) -> StoredFlowVersion:
    flow_id, version, digest, stored_at, runs, latest = row
    return StoredFlowVersion(
        flow_id, version, digest, d.maybe_read_instant(stored_at), runs, bool(latest)
    )
