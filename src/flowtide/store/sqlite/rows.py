"""Records as the SQLite store's rows, and back: instants as integer microseconds since the Unix
epoch (UTC), JSON values as text (:mod:`flowtide.store.jsonvalues`, with the same pointers in
its errors as the memory store's).

Reading a row (a :class:`sqlite3.Row` of the statement's columns) gives a new record, its JSON
values decoded; records are written with the parameters of :mod:`flowtide.store.sqlcore`, bound
as :data:`DIALECT` says.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

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
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json, encode_json
from flowtide.store.records import lineage_of
from flowtide.store.sqlcore.params import Dialect

__all__ = [
    "DIALECT",
    "Params",
    "anchor_item",
    "instant",
    "maybe_instant",
    "maybe_micros",
    "micros",
    "read_anchor",
    "read_answer",
    "read_due",
    "read_event",
    "read_lease",
    "read_park",
    "read_run",
    "read_scatter_item",
    "read_token",
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


# -- tokens and events ------------


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


def read_answer(row: sqlite3.Row) -> SignalAnswer:
    return SignalAnswer(row["key"], row["run_id"], decode_json(row["answer"]))


DIALECT = Dialect(
    instant=micros,
    json=encode_json,
    array=lambda values: json.dumps(values, separators=(",", ":")),
    anchor_item=anchor_item,
)
"""How SQLite takes what the shared statements bind (:mod:`flowtide.store.sqlcore`): instants
as microseconds, a list as JSON text (read with ``json_each``), an anchor's item as JSON."""
