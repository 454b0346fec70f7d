"""The memory store's tables: every row it keeps, by run, with the indexes its parts share
(data only, and the lookups every part makes).

What a database keeps as JSON is kept here as JSON text (see :mod:`flowtide.store.memory.rows`).
"""

from __future__ import annotations

import itertools
from datetime import datetime

from flowtide.store.base import Lease, UnknownRunError, WorkerRecord
from flowtide.store.memory.rows import (
    AnswerRow,
    EventRow,
    ParkRow,
    RequestRow,
    RunRow,
    ScatterRow,
    TokenRow,
)

__all__ = ["Tables"]


class Tables:
    """Every row the memory store keeps. Its parts read and write them: each binds, when it is
    made, the tables (and lookups) it uses, so that what a part touches is listed there."""

    def __init__(self) -> None:
        self.runs: dict[str, RunRow] = {}
        self.states: dict[str, dict[str, str]] = {}
        """run id -> top-level key -> its value as JSON."""
        self.tokens: dict[str, dict[str, TokenRow]] = {}
        """run id -> token id -> row, in the order first written."""
        self.history: dict[str, list[EventRow]] = {}
        """run id -> its events; an event's seq is its position (from 1)."""
        self.due: dict[str, dict[tuple[str, str], tuple[datetime, int]]] = {}
        """run id -> (token id, purpose) -> (instant, order set)."""
        self.due_order = itertools.count()
        self.epochs: dict[str, int] = {}
        """run id -> its lease epoch (kept when nobody holds it)."""
        self.leases: dict[str, Lease] = {}
        """run id -> the lease on it, for runs somebody holds."""
        self.held: dict[str, set[str]] = {}
        """owner -> the ids of the runs it holds."""
        self.wakes: dict[str, tuple[datetime, int]] = {}
        """run id -> its wake instant, and the order it was set in (its item in ``wake_heap``)."""
        self.wake_heap: list[tuple[datetime, int, str]] = []
        """(wake instant, order set, run id); an item whose run has another wake since is stale."""
        self.wake_order = itertools.count()
        self.flows: dict[tuple[str, str], tuple[str, str, datetime | None]] = {}
        """(flow id, digest) -> (version, the document as JSON text, when first stored), in the
        order first stored."""
        self.anchors: dict[str, dict[tuple[str, str | None], datetime]] = {}
        """run id -> (placement, item) -> anchor instant."""
        self.parks: dict[str, ParkRow] = {}
        """park id -> row, in the order first written."""
        self.parks_by_run: dict[str, set[str]] = {}
        self.parks_by_key: dict[str, set[str]] = {}
        self.scatter: dict[tuple[str, str], dict[int, ScatterRow]] = {}
        """(run id, progress key) -> item index -> row."""
        self.answers: dict[str, AnswerRow] = {}
        self.requests: dict[str, RequestRow] = {}
        """signal request id -> row."""
        self.workers: dict[str, tuple[WorkerRecord, str, str]] = {}
        """Worker id -> its heartbeat, with its nodes and waiting runs as JSON text."""
        self.run_requests: dict[str, list[str]] = {}
        """Each run's requests, by id, in the order they were recorded."""
        self.deadlines_fired: dict[str, datetime] = {}
        """Each run's latest deadline fired by a commit (requests are recorded no earlier)."""

    def pending(self, run_id: str) -> list[RequestRow]:
        """The run's unanswered requests, oldest first."""
        rows = [self.requests[i] for i in self.run_requests.get(run_id, ())]
        pending = [row for row in rows if row.answer is None]
        return sorted(pending, key=lambda row: row.record.requested_at)

    def put_park(self, park: ParkRow) -> None:
        record = park.record
        old = self.parks.get(record.id)
        if old is not None:
            park.order = old.order
            if old.record.key is not None:
                self.parks_by_key[old.record.key].discard(record.id)
        else:
            park.order = len(self.parks)
        self.parks[record.id] = park
        self.parks_by_run.setdefault(record.run_id, set()).add(record.id)
        if record.key is not None:
            self.parks_by_key.setdefault(record.key, set()).add(record.id)

    def run(self, run_id: str) -> RunRow:
        try:
            return self.runs[run_id]
        except KeyError:
            raise UnknownRunError(run_id) from None
