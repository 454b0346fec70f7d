"""``/metrics``: Prometheus text. Runs by lifecycle and pending requests are read from the
store at each scrape; the worker's series are there when this server runs one."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from flowtide.engine import Lifecycle
from flowtide.server.services import Services, services

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response)
async def metrics(found: Annotated[Services, Depends(services)]) -> Response:
    m = found.metrics
    store = found.store
    runs = await store.list_runs()
    counted = Counter(run.lifecycle for run in runs)
    for lifecycle in Lifecycle:
        m.runs.labels(lifecycle=lifecycle.value).set(counted.get(lifecycle.value, 0))
    pending = 0
    for run in runs:
        if not Lifecycle(run.lifecycle).terminal:
            pending += len(await store.pending_requests(run.id))
    m.pending.set(pending)
    worker = found.worker
    if worker is not None:
        m.held.set(len(worker.held_runs()))
        stats = worker.sweeper.statistics()
        m.claimed.set(stats.claimed)
        m.wakeups.set(stats.wakeups)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
