"""Runs, events, flows and signal receipts as JSON-ready dicts: what ``flowtide show --json``,
``runs --json``, ``history --json`` and ``flows --json`` print, and what the HTTP API answers.
Instants stay ``datetime`` (each caller writes them as ISO 8601 text)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flowtide.client.results import RegisteredFlow
from flowtide.engine.handles import SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.children import open_parks
from flowtide.engine.worker.heartbeat import waiting_for
from flowtide.store.base import (
    LIVE_TOKEN_STATUSES,
    EventRecord,
    Lease,
    RunRecord,
    Store,
    StoredFlowVersion,
    TokenRecord,
    WorkerRecord,
)

__all__ = [
    "Row",
    "event_json",
    "next_deadline",
    "receipt_json",
    "registered_json",
    "run_detail",
    "run_json",
    "run_row",
    "token_json",
    "version_json",
]

Row = tuple[RunRecord, list[TokenRecord], Lease | None, list[str]]
"""A run, its live tokens, its lease, and the nodes it waits for (see :func:`waiting_for`)."""


def next_deadline(run: RunRecord, tokens: list[TokenRecord]) -> datetime | None:
    """The nearest deadline of a run: a live token's window or the whole run's."""
    instants = [t.deadline for t in tokens if t.deadline is not None]
    if run.deadline is not None and not Lifecycle(run.lifecycle).terminal:
        instants.append(run.deadline)
    return min(instants, default=None)


async def run_row(store: Store, run: RunRecord, beats: list[WorkerRecord]) -> Row:
    """The run with its live tokens, lease and what it waits for (``beats``: the workers)."""
    tokens = list(await store.tokens(run.id, LIVE_TOKEN_STATUSES))
    lease = await store.lease_of(run.id)
    return run, tokens, lease, waiting_for(run.id, lease, beats)


def run_json(
    run: RunRecord, tokens: list[TokenRecord], lease: Lease | None, waiting: list[str]
) -> dict[str, Any]:
    """One run as ``flowtide runs --json`` lists it."""
    return {
        "run_id": run.id,
        "flow": run.flow_id,
        "version": run.flow_version,
        "lifecycle": run.lifecycle,
        "outcome": run.outcome,
        "created_at": run.created_at,
        "deadline": run.deadline,
        "next_deadline": next_deadline(run, tokens),
        "tokens": [token_json(t) for t in tokens],
        "held_by": lease.owner if lease is not None else None,
        "lease_expires": lease.expires if lease is not None else None,
        "waiting_for": waiting,
    }


def token_json(t: TokenRecord) -> dict[str, Any]:
    return {
        "token_id": t.id,
        "placement": t.placement,
        "status": t.status.value,
        "attempt": t.attempt,
        "visit": t.visit,
        "deadline": t.deadline,
        "due": t.due,
    }


async def run_detail(store: Store, run_id: str) -> dict[str, Any]:
    """One run as ``flowtide show --json`` gives it: :func:`run_json` with its open parks
    (its subflows' children's too), state, due entries, pending requests and errors."""
    run = await store.get_run(run_id)
    row = await run_row(store, run, list(await store.workers()))
    parks = await open_parks(store, run_id)
    data = run_json(*row)
    data["parks"] = [
        {
            "placement": p.placement,
            "key": p.key,
            "deadline": p.deadline,
            "payload": p.payload,
            "park": p.id,
            "token_id": p.token_id,
            **({"run_id": p.run_id} if p.run_id != run_id else {}),
        }
        for p in parks
    ]
    data["state"] = await store.get_state(run_id)
    data["due"] = [
        {"when": e.when, "token_id": e.token_id, "purpose": e.purpose or "wait"}
        for e in await store.due_of(run_id)
    ]
    data["pending_requests"] = [
        {"id": r.id, "kind": r.kind, "requested_at": r.requested_at, "request": r.request}
        for r in await store.pending_requests(run_id)
    ]
    data["errors"] = list((run.result or {}).get("errors", []))
    return data


def event_json(event: EventRecord) -> dict[str, Any]:
    """One history event as ``flowtide history --json`` prints it (its instant as ISO text)."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "at": event.at.isoformat(),
        "run_id": event.run_id,
        "placement": event.placement,
        "attempt": event.attempt,
        "token_id": event.token_id,
        "data": event.data,
    }


def version_json(v: StoredFlowVersion) -> dict[str, Any]:
    """One stored flow version as ``flowtide flows --json`` lists it."""
    return {
        "flow": v.flow_id,
        "version": v.version,
        "digest": v.digest,
        "stored_at": v.stored_at,
        "runs": v.runs,
        "latest": v.latest,
    }


def registered_json(r: RegisteredFlow) -> dict[str, Any]:
    return {"flow": r.flow_id, "version": r.version, "digest": r.digest, "new": r.new}


def receipt_json(receipt: SignalReceipt) -> dict[str, Any]:
    """An accepted signal's receipt."""
    return {
        "run_id": receipt.run_id,
        "token_id": receipt.token_id,
        "placement": receipt.placement,
        "output": receipt.output,
        "at": receipt.at,
        "park": receipt.park,
        "idempotency_key": receipt.idempotency_key,
        "duplicate": receipt.duplicate,
    }
