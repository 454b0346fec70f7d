"""``/healthz`` (the process lives) and ``/readyz`` (the store answers; the worker runs, if
this server runs one)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from flowtide.server.services import Services, services

__all__ = ["router"]

log = logging.getLogger("flowtide.server")

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, Any]:
    return {"ok": True}


@router.get("/readyz")
async def readyz(found: Annotated[Services, Depends(services)]) -> JSONResponse:
    try:
        await found.store.workers()
        store = True
    except Exception as exc:  # (any failure of the store: not ready, and why in the log)
        log.warning("readiness: the store does not answer: %s", type(exc).__name__)
        store = False
    worker = found.worker_running if found.worker is not None else None
    ready = store and worker is not False
    return JSONResponse({"store": store, "worker": worker}, status_code=200 if ready else 503)
