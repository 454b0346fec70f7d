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
    DuplicateSignal,
    EventRecord,
    Expect,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
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
        self._due: dict[str, dict[str, DueEntry]] = {}
        """token id -> purpose -> entry (the live entries)."""
        self._due_heap: list[tuple[datetime, int, DueEntry]] = []
        """Every entry ever set; an entry no longer live is stale and skipped (lazy deletion)."""
        self._due_seq = itertools.count()
        self._anchors: dict[tuple[str, str, str | None], datetime] = {}
        self._scatter: dict[tuple[str, str], dict[int, ScatterItemRecord]] = {}
        self._parks: dict[str, ParkRecord] = {}
        self._parks_by_run: dict[str, list[str]] = {}
        self._parks_by_key: dict[str, list[str]] = {}
        self._answers: dict[str, SignalAnswer] = {}

    async def create_run(
        self, run: RunRecord, state: Mapping[str, Any], commit: Commit | None = None
    ) -> Sequence[EventRecord]:
        if run.id in self._runs:
            raise StoreError(f"run {run.id!r} already exists")
        self._runs[run.id] = _copy_run(run)
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
        # Every part of a commit is optional: each is looked at only when present (most steps
        # carry a token or two, events and perhaps state keys).
        run_id = c.run_id
        tokens = self._tokens[run_id]
        if c.expect:
            for token_id, wanted in c.expect.items():
                expect = wanted if isinstance(wanted, Expect) else Expect(wanted)
                why = expect.check(tokens.get(token_id))
                if why is not None:
                    raise StoreConflict(f"token {token_id!r} of run {run_id!r} is {why}")
        if c.signal_answers:
            for answer in c.signal_answers:
                if answer.key in self._answers:
                    raise DuplicateSignal(f"signal idempotency key {answer.key!r} already answered")
        if c.run is not None:
            self._runs[run_id] = _copy_run(c.run)
        for t in c.tokens:
            # Copied: the engine goes on mutating its token records.
            tokens[t.id] = _copy_token(t)
        if c.state is not None or c.state_deleted:
            state = self._states[run_id]
            if c.state:
                state.update(c.state)
            for key in c.state_deleted:
                state.pop(key, None)
        if c.due_cleared:
            for token_id in c.due_cleared:
                self._due.pop(token_id, None)
        if c.due_dropped:
            for token_id, purpose in c.due_dropped:
                mine = self._due.get(token_id)
                if mine is not None:
                    mine.pop(purpose, None)
                    if not mine:
                        del self._due[token_id]
        if c.due:
            for entry in c.due:
                self._due.setdefault(entry.token_id, {})[entry.purpose] = entry
                heapq.heappush(self._due_heap, (entry.when, next(self._due_seq), entry))
        if c.anchors or c.anchors_released or c.parks or c.signal_answers:
            self._apply_parking(c)
        if c.scatter:
            for record in c.scatter:
                items = self._scatter.setdefault((record.run_id, record.token_id), {})
                items[record.index] = replace(record)
        if not c.events:
            return ()
        history = self._history[run_id]
        seq = len(history)
        # A stored event is a new record (it carries its seq); its data is not copied: the
        # engine never changes an event's data once the event is committed.
        out = [
            EventRecord(e.kind, e.run_id, e.at, e.placement, e.attempt, e.token_id, e.data, seq)
            for seq, e in enumerate(c.events, seq + 1)
        ]
        history.extend(out)
        return out

    def _apply_parking(self, c: Commit) -> None:
        for anchor in c.anchors:
            self._anchors[(anchor.run_id, anchor.placement, anchor.item)] = anchor.at
        for placement, item in c.anchors_released:
            self._anchors.pop((c.run_id, placement, item), None)
        for park in c.parks:
            if park.id not in self._parks:
                self._parks_by_run.setdefault(park.run_id, []).append(park.id)
                if park.key is not None:
                    self._parks_by_key.setdefault(park.key, []).append(park.id)
            self._parks[park.id] = _copy_park(park)
        for answer in c.signal_answers:
            self._answers[answer.key] = answer

    async def get_run(self, run_id: str) -> RunRecord:
        try:
            return _copy_run(self._runs[run_id])
        except KeyError:
            raise UnknownRunError(run_id) from None

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return [
            _copy_run(r)
            for r in self._runs.values()
            if lifecycle is None or r.lifecycle == lifecycle
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

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        if run_id not in self._tokens:
            raise UnknownRunError(run_id)
        found = self._tokens[run_id].get(token_id)
        return _copy_token(found) if found is not None else None

    def _live(self, entry: DueEntry) -> bool:
        mine = self._due.get(entry.token_id)
        return mine is not None and mine.get(entry.purpose) is entry

    def _prune(self) -> None:
        heap = self._due_heap
        while heap and not self._live(heap[0][2]):
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
            mine = self._due[entry.token_id]
            del mine[entry.purpose]
            if not mine:
                del self._due[entry.token_id]
            out.append(entry)
        return out

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._anchors.get((run_id, placement, item))

    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return [
            NodeAnchor(r, placement, item, at)
            for (r, placement, item), at in self._anchors.items()
            if r == run_id
        ]

    async def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        if key is not None:
            ids = self._parks_by_key.get(key, [])
        elif run_id is not None:
            ids = self._parks_by_run.get(run_id, [])
        else:
            raise StoreError("parks() needs a run_id or a key")
        out = []
        for park_id in ids:
            park = self._parks[park_id]
            if run_id is not None and park.run_id != run_id:
                continue
            if placement is not None and park.placement != placement:
                continue
            if open_only and park.status is not ParkStatus.PARKED:
                continue
            out.append(_copy_park(park))
        return out

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        return self._answers.get(key)

    async def scatter_items(self, run_id: str, token_id: str) -> Sequence[ScatterItemRecord]:
        items = self._scatter.get((run_id, token_id), {})
        return [replace(items[i]) for i in sorted(items)]

    # -- introspection for tests ------------

    def due_entries(self) -> list[DueEntry]:
        """Every pending due entry, earliest first."""
        return sorted(
            (e for mine in self._due.values() for e in mine.values()), key=lambda e: e.when
        )


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
        t.epoch,
    )


def _copy_run(r: RunRecord) -> RunRecord:
    return RunRecord(
        r.id,
        r.flow_id,
        r.flow_version,
        r.lifecycle,
        r.created_at,
        r.deadline,
        r.started_at,
        r.finished_at,
        r.parent_run_id,
        r.parent_token_id,
        r.depth,
        r.outcome,
        r.result,
        dict(r.options),
        _copy_resume(r.resume) if r.resume is not None else None,
    )


def _copy_resume(resume: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run's resume checkpoint (flat values, one level of dicts and lists)."""
    return {
        k: dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
        for k, v in resume.items()
    }


def _copy_park(p: ParkRecord) -> ParkRecord:
    return ParkRecord(
        p.id,
        p.run_id,
        p.token_id,
        p.placement,
        p.visit,
        p.epoch,
        p.parked_at,
        p.deadline,
        p.key,
        p.payload,
        p.status,
        p.closed_at,
        p.closed_by,
    )
