"""The memory store's signal requests: recorded no earlier than the run's latest deadline
fired, each with a due entry that wakes the run's holder, and answered by a commit."""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.store.base import ENDED_LIFECYCLES, RunEndedError, SignalRequest, StoreError
from flowtide.store.memory.leases import Leases
from flowtide.store.memory.rows import RequestRow
from flowtide.store.memory.tables import Tables

__all__ = ["Requests"]


class Requests:
    """Records signal requests in ``tables``, waking their runs through ``leases``."""

    def __init__(self, tables: Tables, leases: Leases) -> None:
        self._deadlines_fired = tables.deadlines_fired
        self._due = tables.due
        self._due_order = tables.due_order
        self._pending = tables.pending
        self._requests = tables.requests
        self._run = tables.run
        self._run_requests = tables.run_requests
        self._runs = tables.runs
        self._rewake = leases.rewake

    def request_signal(self, request: SignalRequest) -> SignalRequest:
        run = self._run(request.run_id).record
        if run.lifecycle in ENDED_LIFECYCLES:
            raise RunEndedError(request.run_id, run.lifecycle)
        if request.id in self._requests:
            raise StoreError(f"signal request {request.id!r} already exists")
        row = RequestRow.of(request)
        fired = self._deadlines_fired.get(request.run_id)
        if fired is not None and fired > request.requested_at:
            row.record.requested_at = fired  # (recorded after that deadline's firing)
        self._requests[request.id] = row
        self._run_requests.setdefault(request.run_id, []).append(request.id)
        due = self._due[request.run_id]
        due[(request.id, "signal")] = (row.record.requested_at, next(self._due_order))
        self._rewake(request.run_id, tell=True)
        return row.read()

    def signal_request(self, request_id: str) -> SignalRequest | None:
        row = self._requests.get(request_id)
        return row.read() if row is not None else None

    def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        run = self._runs.get(run_id)
        if run is None or run.record.lifecycle in ENDED_LIFECYCLES:
            return []
        return [row.read() for row in self._pending(run_id)]
