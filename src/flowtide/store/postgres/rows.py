"""Records as the PostgreSQL store's statements take them (parameters) and give them back (rows).

What is kept as JSON is encoded with :func:`~flowtide.store.jsonvalues.encode_json`, named by
the same pointers the memory store gives (``run/options``, ``tokens/0/data``, ``state/<key>``,
...), and read back with :func:`~flowtide.store.jsonvalues.decode_json`: new objects on every
read. Column order in the rows is the order of the ``SELECT`` lists of ``queries.sql``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json, encode_json
from flowtide.store.records import lineage_of
from flowtide.store.sqlcore.params import Dialect

__all__ = [
    "DIALECT",
    "Params",
    "event_of_row",
    "json_text",
    "lease_of_row",
    "park_of_row",
    "run_of_row",
    "scatter_of_row",
    "token_of_row",
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


DIALECT = Dialect(
    instant=lambda when: when,
    json=json_text,
    array=list,
    anchor_item=lambda item: item,
)
"""How PostgreSQL takes what the shared statements bind (:mod:`flowtide.store.sqlcore`):
instants as ``timestamptz``, a list as an array, an anchor's item as it is."""
