"""How the SQLite store keeps values in its rows: instants as integer microseconds since the
Unix epoch (UTC), JSON values as text (:mod:`flowtide.store.jsonvalues`, with the same pointers
in its errors as the memory store's), a list bound as one parameter as JSON text (read with
``json_each``), a node anchor's item as JSON text (``null`` when it has none, so that every
anchor has a key a unique index can tell apart). Rows are read into records by the shared
decoder (:mod:`flowtide.store.sqlcore.rows`), as :data:`DIALECT` says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.store.jsonvalues import encode_json
from flowtide.store.sqlcore.params import Dialect

__all__ = ["DIALECT", "Params", "anchor_item", "instant", "maybe_instant", "micros"]

Params = dict[str, Any]
"""The named parameters of one statement."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MICROSECOND = timedelta(microseconds=1)


def micros(when: datetime) -> int:
    """``when`` (an aware instant) as microseconds since the Unix epoch."""
    if when.tzinfo is None:
        raise ValueError(f"instant {when!r} has no time zone")
    return (when - EPOCH) // ONE_MICROSECOND


def instant(us: int) -> datetime:
    """The UTC instant ``us`` microseconds after the Unix epoch."""
    return EPOCH + timedelta(microseconds=us)


def maybe_instant(us: int | None) -> datetime | None:
    return None if us is None else instant(us)


def anchor_item(item: str | None) -> str:
    """A node anchor's item as its key column: JSON text (``null`` when it has none)."""
    return json.dumps(item)


def _anchor_item_of(key: str) -> str | None:
    item: str | None = json.loads(key)
    return item


DIALECT = Dialect(
    instant=micros,
    json=encode_json,
    array=lambda values: json.dumps(values, separators=(",", ":")),
    anchor_item=anchor_item,
    duration=lambda span: span // ONE_MICROSECOND,
    read_instant=instant,
    read_anchor_item=_anchor_item_of,
)
"""How SQLite takes what the shared statements bind, and gives it back."""
