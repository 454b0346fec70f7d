"""An in-memory store: for tests and throwaway runs. Nothing survives the process.

A commit is applied without yielding to the event loop, so it is atomic with respect to other
tasks. Records are copied on the way in and out, so the engine cannot change stored data by
mutating its own objects (as with a real database).
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    RunRecord,
    ScatterItemRecord,
    Store,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._states: dict[str, dict[str, Any]] = {}
        self._tokens: dict[str, dict[str, TokenRecord]] = {}
        self._history: dict[str, list[EventRecord]] = {}
        self._due: dict[str, DueEntry] = {}
        self._due_heap: list[tuple[datetime, int, DueEntry]] = []
        self._due_seq = itertools.count()
        self._anchors: dict[tuple[str, str, str | None], datetime] = {}
        self._scatter: dict[tuple[str, str], dict[int, ScatterItemRecord]] = {}

    async def create_run(
        self, run: RunRecord, state: Mapping[str, Any], commit: Commit | None = None
    ) -> Sequence[EventRecord]:
        if run.id in self._runs:
            raise StoreError(f"run {run.id!r} already exists")
        self._runs[run.id] = replace(run)
        self._states[run.id] = dict(state)
        self._tokens[run.id] = {}
        self._history[run.id] = []
        if commit is None:
            return ()
        return self._apply(commit)

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        if commit.run_id not in self._runs:
            raise UnknownRunError(commit.run_id)
        return self._apply(commit)

    def _apply(self, c: Commit) -> Sequence[EventRecord]:
        tokens = self._tokens[c.run_id]
        for token_id, status in c.expect.items():
            found = tokens.get(token_id)
            if found is None or found.status is not status:
                have = found.status.value if found is not None else "missing"
                raise StoreConflict(
                    f"token {token_id!r} of run {c.run_id!r} is {have}, not {status.value}"
                )
        if c.run is not None:
            self._runs[c.run_id] = replace(c.run)
        for t in c.tokens:
            tokens[t.id] = _copy_token(t)
        if c.state is not None or c.state_deleted:
            state = self._states[c.run_id]
            if c.state:
                state.update(c.state)
            for key in c.state_deleted:
                state.pop(key, None)
        for token_id in c.due_cleared:
            self._due.pop(token_id, None)
        for entry in c.due:
            self._due[entry.token_id] = entry
            heapq.heappush(self._due_heap, (entry.when, next(self._due_seq), entry))
        for anchor in c.anchors:
            self._anchors[(anchor.run_id, anchor.placement, anchor.item)] = anchor.at
        for item in c.scatter:
            self._scatter.setdefault((item.run_id, item.token_id), {})[item.index] = replace(item)
        if not c.events:
            return ()
        history = self._history[c.run_id]
        out = []
        for e in c.events:
            stored = EventRecord(
                e.kind,
                e.run_id,
                e.at,
                e.placement,
                e.attempt,
                e.token_id,
                e.data,
                len(history) + 1,
            )
            history.append(stored)
            out.append(stored)
        return out

    async def get_run(self, run_id: str) -> RunRecord:
        try:
            return replace(self._runs[run_id])
        except KeyError:
            raise UnknownRunError(run_id) from None

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return [
            replace(r) for r in self._runs.values() if lifecycle is None or r.lifecycle == lifecycle
        ]

    async def get_state(self, run_id: str) -> dict[str, Any]:
        try:
            return copy.deepcopy(self._states[run_id])
        except KeyError:
            raise UnknownRunError(run_id) from None

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        if run_id not in self._tokens:
            raise UnknownRunError(run_id)
        wanted = set(statuses) if statuses is not None else None
        return [
            _copy_token(t)
            for t in self._tokens[run_id].values()
            if wanted is None or t.status in wanted
        ]

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        if run_id not in self._history:
            raise UnknownRunError(run_id)
        return list(self._history[run_id][after:])

    def _prune(self) -> None:
        heap = self._due_heap
        while heap and self._due.get(heap[0][2].token_id) is not heap[0][2]:
            heapq.heappop(heap)

    async def next_due(self) -> datetime | None:
        self._prune()
        return self._due_heap[0][0] if self._due_heap else None

    async def claim_due(self, now: datetime, limit: int = 100) -> Sequence[DueEntry]:
        out: list[DueEntry] = []
        while len(out) < limit:
            self._prune()
            if not self._due_heap or self._due_heap[0][0] > now:
                break
            _, _, entry = heapq.heappop(self._due_heap)
            del self._due[entry.token_id]
            out.append(entry)
        return out

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._anchors.get((run_id, placement, item))

    async def scatter_items(self, run_id: str, token_id: str) -> Sequence[ScatterItemRecord]:
        items = self._scatter.get((run_id, token_id), {})
        return [replace(items[i]) for i in sorted(items)]

    # -- introspection for tests ------------

    def due_entries(self) -> list[DueEntry]:
        """Every pending due entry, earliest first."""
        return sorted(self._due.values(), key=lambda e: e.when)


def _copy_token(t: TokenRecord) -> TokenRecord:
    return TokenRecord(
        t.id,
        t.run_id,
        t.placement,
        t.status,
        t.attempt,
        t.visit,
        t.lineage,
        t.deadline,
        t.due,
        t.created_at,
        dict(t.data),
    )
