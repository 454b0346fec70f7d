"""An in-memory store: for tests and throwaway runs. Nothing survives the process.

It is the reference the database stores are measured against, so it behaves as they do. What a
database keeps as JSON (run state, token and event data, park payloads, scatter results and keys,
run results, options and checkpoints, signal answers and requests) is kept here as JSON text and
decoded on every read: what comes back is what a database gives back (a tuple comes back as a
list), as new objects every time. A commit is checked whole (the run, its expectations, its signal
keys, every value it would keep as JSON) before anything changes, and applied without yielding to
the event loop, so other tasks see all of it or nothing.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    PRUNE_BATCH,
    RUNNABLE_LIFECYCLES,
    Commit,
    DueEntry,
    EventRecord,
    Lease,
    LeaseLost,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunEndedError,
    RunRecord,
    RunSnapshot,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    Store,
    StoredFlow,
    StoredFlowVersion,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
    UnknownStoredFlow,
    WorkerRecord,
)
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.jsonvalues import decode_json, encode_json, encode_state
from flowtide.store.memory_rows import (
    AnswerRow,
    EventRow,
    ParkRow,
    RequestRow,
    RunRow,
    ScatterRow,
    TokenRow,
    replace,
)
from flowtide.store.workers import with_texts, worker_texts

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A store in this process's memory: for tests and throwaway runs (nothing survives it)."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRow] = {}
        self._states: dict[str, dict[str, str]] = {}
        """run id -> top-level key -> its value as JSON."""
        self._tokens: dict[str, dict[str, TokenRow]] = {}
        """run id -> token id -> row, in the order first written."""
        self._history: dict[str, list[EventRow]] = {}
        """run id -> its events; an event's seq is its position (from 1)."""
        self._due: dict[str, dict[tuple[str, str], tuple[datetime, int]]] = {}
        """run id -> (token id, purpose) -> (instant, order set)."""
        self._due_order = itertools.count()
        self._epochs: dict[str, int] = {}
        """run id -> its lease epoch (kept when nobody holds it)."""
        self._leases: dict[str, Lease] = {}
        """run id -> the lease on it, for runs somebody holds."""
        self._held: dict[str, set[str]] = {}
        """owner -> the ids of the runs it holds."""
        self._wakes: dict[str, tuple[datetime, int]] = {}
        """run id -> its wake instant, and the order it was set in (its item in ``_wake_heap``)."""
        self._wake_heap: list[tuple[datetime, int, str]] = []
        """(wake instant, order set, run id); an item whose run has another wake since is stale."""
        self._wake_order = itertools.count()
        self._flows: dict[tuple[str, str], tuple[str, str, datetime | None]] = {}
        """(flow id, digest) -> (version, the document as JSON text, when first stored), in the
        order first stored."""
        self._watchers: set[asyncio.Event] = set()
        """Who waits in :meth:`wait_changed` (engines sharing this store in one process)."""
        self._anchors: dict[str, dict[tuple[str, str | None], datetime]] = {}
        """run id -> (placement, item) -> anchor instant."""
        self._parks: dict[str, ParkRow] = {}
        """park id -> row, in the order first written."""
        self._parks_by_run: dict[str, set[str]] = {}
        self._parks_by_key: dict[str, set[str]] = {}
        self._scatter: dict[tuple[str, str], dict[int, ScatterRow]] = {}
        """(run id, progress key) -> item index -> row."""
        self._answers: dict[str, AnswerRow] = {}
        self._requests: dict[str, RequestRow] = {}
        self._workers: dict[str, tuple[WorkerRecord, str, str]] = {}
        """Worker id -> its heartbeat, with its nodes and waiting runs as JSON text."""
        self._on_request: list[Callable[[], None]] = []
        self._run_requests: dict[str, list[str]] = {}
        """Each run's requests, by id, in the order they were recorded."""
        self._deadlines_fired: dict[str, datetime] = {}
        """Each run's latest deadline fired by a commit (requests are recorded no earlier)."""
        """signal request id -> row."""

    # -- writes ------------

    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        if run.id in self._runs:
            raise StoreError(f"run {run.id!r} already exists")
        if commit is not None and commit.run_id != run.id:
            raise ValueError(f"a commit of run {commit.run_id!r} cannot create run {run.id!r}")
        if lease is not None and lease.run_id != run.id:
            raise ValueError(f"a lease on run {lease.run_id!r} cannot create run {run.id!r}")
        row = RunRow.of(run, "run")
        initial = encode_state(state)
        if commit is not None and commit.lease is not None and commit.lease != lease:
            raise LeaseLost(f"run {run.id!r} is created without the lease its commit carries")
        step = self._prepared(commit, created=True) if commit is not None else None
        self._runs[run.id] = row
        self._states[run.id] = initial
        self._tokens[run.id] = {}
        self._history[run.id] = []
        self._due[run.id] = {}
        self._epochs[run.id] = lease.epoch if lease is not None else 0
        if lease is not None:
            self._hold(lease)
        events = self._apply(step) if step is not None else []
        self._rewake(run.id, tell=lease is None)  # (nobody holds it: it needs a worker)
        return events

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        if commit.run_id not in self._runs:
            raise UnknownRunError(commit.run_id)
        events = self._apply(self._prepared(commit))
        self._rewake(commit.run_id)
        return events

    def _prepared(self, c: Commit, *, created: bool = False) -> _Step:
        """``c`` checked and encoded: raises (having changed nothing) if it cannot apply."""
        check_commit(c, self._facts(c), creating=created)
        return _Step(
            c,
            RunRow.of(c.run, "run") if c.run is not None else None,
            [TokenRow.of(t, f"tokens/{i}") for i, t in enumerate(c.tokens)],
            encode_state(c.state or {}),
            [EventRow.of(e, f"events/{i}") for i, e in enumerate(c.events)],
            [ScatterRow.of(s, f"scatter/{i}") for i, s in enumerate(c.scatter)],
            [ParkRow.of(p, f"parks/{i}") for i, p in enumerate(c.parks)],
            [AnswerRow.of(a, f"signal_answers/{i}") for i, a in enumerate(c.signal_answers)],
            [
                (a.request_id, encode_json(a.answer, f"requests_answered/{i}/answer"), a.at)
                for i, a in enumerate(c.requests_answered)
            ],
        )

    def _facts(self, c: Commit) -> RunFacts:
        """What ``c`` is checked against (:func:`flowtide.store.checks.check_commit`)."""
        run_id = c.run_id
        stored = self._runs.get(run_id)
        held = self._leases.get(run_id)
        tokens = self._tokens.get(run_id, {})
        expected = {
            token_id: (row.record.status, row.record.epoch, row.record.deadline)
            for token_id in c.expect
            if (row := tokens.get(token_id)) is not None
        }
        unanswerable: dict[str, str] = {}
        for answer in c.requests_answered:
            kept = self._requests.get(answer.request_id)
            if kept is None or kept.record.run_id != run_id:
                unanswerable[answer.request_id] = "unknown"
            elif kept.answer is not None:
                unanswerable[answer.request_id] = "answered"
        before = None
        if c.fires_deadline is not None:
            before = next(
                (
                    r.record.id
                    for r in self._pending(run_id)
                    if r.record.requested_at < c.fires_deadline
                ),
                None,
            )
        return RunFacts(
            stored.record.lifecycle if stored is not None else None,
            held.owner if held is not None else None,
            self._epochs.get(run_id, 0),
            expected,
            {a.key for a in c.signal_answers if a.key in self._answers},
            unanswerable,
            before,
        )

    def _apply(self, step: _Step) -> list[EventRecord]:
        """Apply a prepared commit (nothing here can fail); returns its events as stored."""
        c = step.commit
        run_id = c.run_id
        if step.run is not None:
            self._runs[run_id] = step.run
        tokens = self._tokens[run_id]
        for token in step.tokens:
            tokens[token.record.id] = token
        state = self._states[run_id]
        state.update(step.state)
        for key in c.state_deleted:
            state.pop(key, None)
        history = self._history[run_id]
        first = len(history) + 1
        for seq, (kept, given) in enumerate(zip(step.events, c.events, strict=True), first):
            kept.record.seq = given.seq = seq  # (the caller's records too: a database returns it)
            history.append(kept)
        due = self._due[run_id]
        for token_id in c.due_cleared:
            for name in [name for name in due if name[0] == token_id]:
                del due[name]
        for token_id, purpose in c.due_dropped:
            due.pop((token_id, purpose), None)
        for entry in c.due_fired:
            fired = due.get((entry.token_id, entry.purpose))
            if fired is not None and fired[0] == entry.when:
                del due[(entry.token_id, entry.purpose)]
        for entry in c.due:
            due[(entry.token_id, entry.purpose)] = (entry.when, next(self._due_order))
        if self._runs[run_id].record.lifecycle in ENDED_LIFECYCLES:
            due.clear()
        for entry in c.wakes:  # (another run's entry: kept unless that run has ended)
            woken = self._runs.get(entry.run_id)
            if woken is not None and woken.record.lifecycle not in ENDED_LIFECYCLES:
                instant = (entry.when, next(self._due_order))
                self._due[entry.run_id][(entry.token_id, entry.purpose)] = instant
                self._rewake(entry.run_id, tell=True)  # (its holder may be another engine)
        for anchor in c.anchors:
            self._anchors.setdefault(anchor.run_id, {})[(anchor.placement, anchor.item)] = anchor.at
        for placement, item in c.anchors_released:
            self._anchors.get(run_id, {}).pop((placement, item), None)
        for row in step.scatter:
            done = row.record
            self._scatter.setdefault((done.run_id, done.progress), {})[done.index] = row
        for park in step.parks:
            self._put_park(park)
        for answer in step.answers:
            self._answers[answer.record.key] = answer
        for request_id, text, when in step.requests_answered:
            request = self._requests[request_id]
            request.answer, request.record.answered_at = text, when
        if c.fires_deadline is not None:
            latest = self._deadlines_fired.get(run_id, c.fires_deadline)
            self._deadlines_fired[run_id] = max(c.fires_deadline, latest)
        if c.take is not None:
            self._hold(c.take.lease)
        if c.release:
            self._let_go(run_id)
        return list(c.events)

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
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

    def on_request(self, wake: Callable[[], None]) -> Callable[[], None]:
        self._on_request.append(wake)
        return lambda: self._on_request.remove(wake)

    def _pending(self, run_id: str) -> list[RequestRow]:
        """The run's unanswered requests, oldest first."""
        rows = [self._requests[i] for i in self._run_requests.get(run_id, ())]
        pending = [row for row in rows if row.answer is None]
        return sorted(pending, key=lambda row: row.record.requested_at)

    # -- leases and wake instants ------------

    def _hold(self, lease: Lease) -> None:
        old = self._leases.get(lease.run_id)
        if old is not None:
            self._held[old.owner].discard(lease.run_id)
        self._leases[lease.run_id] = lease
        self._epochs[lease.run_id] = lease.epoch
        self._held.setdefault(lease.owner, set()).add(lease.run_id)

    def _let_go(self, run_id: str) -> None:
        lease = self._leases.pop(run_id, None)
        if lease is not None:
            self._held[lease.owner].discard(run_id)

    def _take(self, run_id: str, owner: str, expires: datetime) -> Lease:
        old = self._leases.get(run_id)
        same = old is not None and old.owner == owner
        epoch = self._epochs[run_id] if same else self._epochs[run_id] + 1
        self._hold(Lease(run_id, owner, epoch, expires))
        self._rewake(run_id)
        # (Whom it was taken from is said by this answer only: a lease read later does not.)
        taken_from = None if old is None or same else old.owner
        return Lease(run_id, owner, epoch, expires, taken_from)

    async def wait_changed(self, seconds: float) -> bool:
        changed = asyncio.Event()
        self._watchers.add(changed)
        try:
            async with asyncio.timeout(seconds):
                await changed.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self._watchers.discard(changed)

    def _rewake(self, run_id: str, *, tell: bool = False) -> None:
        """Bring the run's wake instant up to date (see :mod:`flowtide.store.base`), and tell
        whoever waits for a change (``tell``: the engines of this process too)."""
        for watcher in self._watchers:
            watcher.set()
        for engine in list(self._on_request) if tell else ():
            engine()
        run = self._runs[run_id].record
        wake: datetime | None
        if run.lifecycle in ENDED_LIFECYCLES:
            wake = None
        else:
            due = self._due[run_id]
            first = min((when for when, _ in due.values()), default=None)
            lease = self._leases.get(run_id)
            if lease is not None:
                wake = lease.expires if first is None else min(lease.expires, first)
            elif run.lifecycle in RUNNABLE_LIFECYCLES:
                wake = run.created_at
            else:
                wake = first
        old = self._wakes.get(run_id)
        if old is not None and old[0] == wake:
            return
        if wake is None:
            self._wakes.pop(run_id, None)
            return
        order = next(self._wake_order)
        self._wakes[run_id] = (wake, order)
        heapq.heappush(self._wake_heap, (wake, order, run_id))
        if len(self._wake_heap) > 2 * len(self._wakes) + 64:
            # Replaced items wait at their place until they reach the top: drop them at once.
            self._wake_heap = sorted((w, o, r) for r, (w, o) in self._wakes.items())

    def _first_wake(self) -> tuple[datetime, int, str] | None:
        """The heap's earliest item that is still its run's wake (stale items are dropped)."""
        heap = self._wake_heap
        while heap:
            when, order, run_id = heap[0]
            if self._wakes.get(run_id) == (when, order):
                return heap[0]
            heapq.heappop(heap)
        return None

    async def next_wake(self) -> datetime | None:
        first = self._first_wake()
        return first[0] if first is not None else None

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        taken: list[Lease] = []
        passed: list[tuple[datetime, int, str]] = []
        seen: set[str] = set()
        while len(taken) < limit:
            first = self._first_wake()
            if first is None or first[0] > now:
                break
            heapq.heappop(self._wake_heap)
            run_id = first[2]
            lease = self._leases.get(run_id)
            if run_id in seen or (
                lease is not None and lease.owner != owner and lease.expires > now
            ):
                passed.append(first)  # (held by a live owner: its wake is that owner's)
                continue
            seen.add(run_id)
            del self._wakes[run_id]
            taken.append(self._take(run_id, owner, expires))
        for item in passed:
            heapq.heappush(self._wake_heap, item)
        return taken

    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        run = self._run(run_id).record
        if run.lifecycle in ENDED_LIFECYCLES:
            return None
        lease = self._leases.get(run_id)
        if lease is not None and lease.owner != owner and lease.expires > now and not force:
            return None
        return self._take(run_id, owner, expires)

    async def renew_leases(
        self, owner: str, expires: datetime, *, now: datetime | None = None
    ) -> Sequence[Lease]:
        for run_id in sorted(self._held.get(owner, ())):
            self._leases[run_id] = Lease(run_id, owner, self._leases[run_id].epoch, expires)
            self._rewake(run_id)
        return [self._leases[run_id] for run_id in sorted(self._held.get(owner, ()))]

    async def release_runs(self, owner: str) -> Sequence[str]:
        released = sorted(self._held.pop(owner, set()))
        for run_id in released:
            del self._leases[run_id]
            self._rewake(run_id)
        return released

    async def lease_of(self, run_id: str) -> Lease | None:
        self._run(run_id)
        return self._leases.get(run_id)

    # -- flows ------------

    async def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        text = encode_json(flow.document, "document")
        key = (flow.flow_id, flow.digest)
        if key in self._flows:
            return False
        self._flows[key] = (flow.version, text, stored_at)
        return True

    async def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        kept = self._flows.get((flow_id, digest))
        if kept is None:
            raise UnknownStoredFlow(flow_id, digest)
        version, text, _ = kept
        return StoredFlow(flow_id, version, digest, decode_json(text))

    async def record_worker(self, worker: WorkerRecord) -> None:
        nodes, waiting = worker_texts(worker)
        self._workers[worker.worker_id] = (replace(worker, nodes=[], waiting={}), nodes, waiting)

    async def workers(self) -> Sequence[WorkerRecord]:
        return [with_texts(*self._workers[w]) for w in sorted(self._workers)]

    async def forget_worker(self, worker_id: str) -> bool:
        return self._workers.pop(worker_id, None) is not None

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        digests = [digest for fid, digest in self._flows if fid == flow_id]
        if not digests:
            raise UnknownStoredFlow(flow_id)
        return await self.get_flow(flow_id, digests[-1])

    async def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        runs: dict[tuple[str, object], int] = {}
        for row in self._runs.values():
            key = (row.record.flow_id, decode_json(row.options).get("flow_digest"))
            runs[key] = runs.get(key, 0) + 1
        kept = [(key, value) for key, value in self._flows.items() if flow_id in (None, key[0])]
        last = {fid: digest for (fid, digest), _ in kept}
        found = [
            StoredFlowVersion(
                fid, version, digest, stored_at, runs.get((fid, digest), 0), last[fid] == digest
            )
            for (fid, digest), (version, _, stored_at) in kept
        ]
        # (By id, each id's in the order first stored: the sort is stable.)
        return sorted(found, key=lambda v: v.flow_id)

    def _put_park(self, park: ParkRow) -> None:
        record = park.record
        old = self._parks.get(record.id)
        if old is not None:
            park.order = old.order
            if old.record.key is not None:
                self._parks_by_key[old.record.key].discard(record.id)
        else:
            park.order = len(self._parks)
        self._parks[record.id] = park
        self._parks_by_run.setdefault(record.run_id, set()).add(record.id)
        if record.key is not None:
            self._parks_by_key.setdefault(record.key, set()).add(record.id)

    # -- reads ------------

    async def get_run(self, run_id: str) -> RunRecord:
        return self._run(run_id).read()

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return [
            row.read()
            for row in self._runs.values()
            if lifecycle is None or row.record.lifecycle == lifecycle
        ]

    async def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        return sorted(run_id for run_id in self._runs if run_id.startswith(prefix))[: max(limit, 0)]

    async def prune_runs(
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

    async def load_run(self, run_id: str) -> RunSnapshot:
        snapshot = await super().load_run(run_id)
        snapshot.lease = self._leases.get(run_id)
        snapshot.epoch = self._epochs[run_id]
        return snapshot

    async def get_state(self, run_id: str) -> dict[str, Any]:
        self._run(run_id)
        return {key: decode_json(text) for key, text in self._states[run_id].items()}

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        self._run(run_id)
        rows: Iterable[TokenRow] = self._tokens[run_id].values()
        if statuses is not None:
            wanted = set(statuses)
            rows = [row for row in rows if row.record.status in wanted]
        return [row.read() for row in rows]

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        self._run(run_id)
        row = self._tokens[run_id].get(token_id)
        return row.read() if row is not None else None

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        self._run(run_id)
        return [row.read() for row in self._history[run_id][max(after, 0) :]]

    async def due_of(self, run_id: str) -> Sequence[DueEntry]:
        self._run(run_id)
        kept = sorted(self._due[run_id].items(), key=lambda item: item[1])
        return [DueEntry(when, run_id, token, purpose) for (token, purpose), (when, _) in kept]

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._anchors.get(run_id, {}).get((placement, item))

    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return [
            NodeAnchor(run_id, placement, item, at)
            for (placement, item), at in self._anchors.get(run_id, {}).items()
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

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        row = self._answers.get(key)
        return row.read() if row is not None else None

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        row = self._requests.get(request_id)
        return row.read() if row is not None else None

    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        run = self._runs.get(run_id)
        if run is None or run.record.lifecycle in ENDED_LIFECYCLES:
            return []
        return [row.read() for row in self._pending(run_id)]

    async def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
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

    def _run(self, run_id: str) -> RunRow:
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRunError(run_id) from None


@dataclass(slots=True)
class _Step:
    """A commit whose checks passed, with what it keeps as JSON already encoded."""

    commit: Commit
    run: RunRow | None
    tokens: list[TokenRow]
    state: dict[str, str]
    events: list[EventRow]
    scatter: list[ScatterRow]
    parks: list[ParkRow]
    answers: list[AnswerRow]
    requests_answered: list[tuple[str, str, datetime]]
    """(request id, answer as JSON, when)."""
