"""The memory store's reads of a run: its record, state, tokens, history, due entries, anchors,
parks, signal answers and scatter items, each read as new objects (see
:mod:`flowtide.store.memory.rows`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    DueEntry,
    EventRecord,
    Lease,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    StoreError,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.memory.rows import TokenRow
from flowtide.store.memory.tables import Tables

__all__ = ["Reads"]


class Reads:
    """Reads of the runs in ``tables``."""

    def __init__(self, tables: Tables) -> None:
        self._anchors = tables.anchors
        self._answers = tables.answers
        self._due = tables.due
        self._epochs = tables.epochs
        self._history = tables.history
        self._leases = tables.leases
        self._parks = tables.parks
        self._parks_by_key = tables.parks_by_key
        self._parks_by_run = tables.parks_by_run
        self._run = tables.run
        self._runs = tables.runs
        self._scatter = tables.scatter
        self._states = tables.states
        self._tokens = tables.tokens

    def get_run(self, run_id: str) -> RunRecord:
        return self._run(run_id).read()

    def holder(self, run_id: str) -> tuple[Lease | None, int]:
        """Who holds the run (a lease that has expired too; None: nobody), and its lease epoch
        (kept while nobody holds it)."""
        return self._leases.get(run_id), self._epochs[run_id]

    def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return [
            row.read()
            for row in self._runs.values()
            if lifecycle is None or row.record.lifecycle == lifecycle
        ]

    def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        return sorted(run_id for run_id in self._runs if run_id.startswith(prefix))[: max(limit, 0)]

    def get_state(self, run_id: str) -> dict[str, Any]:
        self._run(run_id)
        return {key: decode_json(text) for key, text in self._states[run_id].items()}

    def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        self._run(run_id)
        rows: Iterable[TokenRow] = self._tokens[run_id].values()
        if statuses is not None:
            wanted = set(statuses)
            rows = [row for row in rows if row.status in wanted]
        return [row.read() for row in rows]

    def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        self._run(run_id)
        row = self._tokens[run_id].get(token_id)
        return row.read() if row is not None else None

    def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        self._run(run_id)
        return [row.read() for row in self._history[run_id][max(after, 0) :]]

    def due_of(self, run_id: str) -> Sequence[DueEntry]:
        self._run(run_id)
        kept = sorted(self._due[run_id].items(), key=lambda item: item[1])
        return [DueEntry(when, run_id, token, purpose) for (token, purpose), (when, _) in kept]

    def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._anchors.get(run_id, {}).get((placement, item))

    def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return [
            NodeAnchor(run_id, placement, item, at)
            for (placement, item), at in self._anchors.get(run_id, {}).items()
        ]

    def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        if key is not None:
            ids = self._parks_by_key.get(key, set())
        elif run_id is not None:
            ids = self._parks_by_run.get(run_id, set())
        else:
            raise StoreError("parks() needs a run_id or a key")
        rows = sorted((self._parks[park_id] for park_id in ids), key=lambda row: row.order)
        return [
            row.read()
            for row in rows
            if (run_id is None or row.record.run_id == run_id)
            and (placement is None or row.record.placement == placement)
            and (not open_only or row.record.status is ParkStatus.PARKED)
        ]

    def signal_answer(self, key: str) -> SignalAnswer | None:
        row = self._answers.get(key)
        return row.read() if row is not None else None

    def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
        items = self._scatter.get((run_id, progress), {})
        return [items[index].read() for index in sorted(items)]

    def due_entries(self) -> list[DueEntry]:
        """Every due entry of every run, earliest first (for tests)."""
        kept = [
            (when, order, DueEntry(when, run_id, token, purpose))
            for run_id, due in self._due.items()
            for (token, purpose), (when, order) in due.items()
        ]
        return [entry for _, _, entry in sorted(kept, key=lambda k: k[:2])]
