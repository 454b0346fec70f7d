"""Pruning the memory store: deleting ended runs (and everything of theirs) whose parent, if
any, has ended too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowtide.store.base import ENDED_LIFECYCLES, PRUNE_BATCH, RunRecord
from flowtide.store.memory.leases import Leases
from flowtide.store.memory.tables import Tables

__all__ = ["Pruning"]


class Pruning:
    """Deletes ended runs from ``tables``, letting go of their leases through ``leases``."""

    def __init__(self, tables: Tables, leases: Leases) -> None:
        self._anchors = tables.anchors
        self._answers = tables.answers
        self._due = tables.due
        self._epochs = tables.epochs
        self._history = tables.history
        self._parks = tables.parks
        self._parks_by_key = tables.parks_by_key
        self._parks_by_run = tables.parks_by_run
        self._requests = tables.requests
        self._run_requests = tables.run_requests
        self._deadlines_fired = tables.deadlines_fired
        self._runs = tables.runs
        self._scatter = tables.scatter
        self._states = tables.states
        self._tokens = tables.tokens
        self._wakes = tables.wakes
        self._let_go = leases.let_go

    def prune_runs(
        self,
        ended_before: datetime,
        *,
        limit: int = PRUNE_BATCH,
        after: str = "",
        dry_run: bool = False,
    ) -> Sequence[str]:
        found = sorted(
            run_id
            for run_id, row in self._runs.items()
            if run_id > after and self._prunable(row.record, ended_before)
        )[: max(limit, 0)]
        if not dry_run:
            for run_id in found:
                self._forget(run_id)
        return found

    def _prunable(self, run: RunRecord, ended_before: datetime) -> bool:
        if run.lifecycle not in ENDED_LIFECYCLES:
            return False
        if (run.finished_at or run.created_at) >= ended_before:
            return False
        parent = self._runs.get(run.parent_run_id) if run.parent_run_id is not None else None
        return parent is None or parent.record.lifecycle in ENDED_LIFECYCLES

    def _forget(self, run_id: str) -> None:
        """Delete the run and everything of its."""
        self._let_go(run_id)
        for kept in (self._runs, self._states, self._tokens, self._history, self._due):
            del kept[run_id]
        self._epochs.pop(run_id, None)
        self._wakes.pop(run_id, None)  # (its item in the heap is stale now, dropped in time)
        self._anchors.pop(run_id, None)
        self._deadlines_fired.pop(run_id, None)
        self._run_requests.pop(run_id, None)
        for park_id in self._parks_by_run.pop(run_id, set()):
            key = self._parks.pop(park_id).record.key
            if key is not None:
                self._parks_by_key[key].discard(park_id)
        for progress in [k for k in self._scatter if k[0] == run_id]:
            del self._scatter[progress]
        for key in [k for k, a in self._answers.items() if a.record.run_id == run_id]:
            del self._answers[key]
        for rid in [k for k, r in self._requests.items() if r.record.run_id == run_id]:
            del self._requests[rid]
