"""``/api/runs``: start a run, list runs (filtered, paged), read one run, its history and the
explanation of its deadlines."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowtide.client.views import event_json, run_detail, run_json, run_row
from flowtide.engine import EngineError, Lifecycle, UnknownFlowError
from flowtide.engine.flows.stored_flows import flow_from_stored
from flowtide.engine.state.limits import InvalidKeyError, ValueTooLargeError
from flowtide.render.mermaid import render_mermaid
from flowtide.server.auth import writer
from flowtide.server.errors import ApiError
from flowtide.server.services import Services, jsonable, services
from flowtide.store.base import StoreError, UnknownRunError, UnknownStoredFlow

__all__ = ["StartBody", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"])

MOST_LISTED = 500
"""The largest page of runs."""

MOST_DRAWN = 1000
"""How many flow versions' diagrams are kept drawn."""


class StartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flow: str = Field(min_length=1, description="The id of a flow stored in the store.")
    input: dict[str, Any] = Field(default_factory=dict, description="The initial state.")
    deadline: str | None = Field(
        None, description="The whole run's deadline: an ISO 8601 duration or instant."
    )
    run_id: str | None = Field(None, min_length=1, max_length=200)


@router.post("", status_code=201)
async def start_run(
    body: StartBody,
    found: Annotated[Services, Depends(services)],
    _who: Annotated[str, Depends(writer)],
) -> JSONResponse:
    """Store a new run of the flow's latest version, for a worker to run."""
    try:
        run_id = await found.client.start(
            body.flow, body.input, deadline=body.deadline, run_id=body.run_id
        )
    except StoreError:
        if body.run_id is not None and await _exists(found, body.run_id):
            raise ApiError(409, "run_exists", f"a run {body.run_id!r} exists already") from None
        raise
    except (ValueError, ValueTooLargeError, InvalidKeyError) as exc:
        raise ApiError(400, "bad_input", f"cannot start the run: {_line(exc)}") from None
    except UnknownFlowError:
        raise
    except EngineError as exc:
        raise ApiError(400, "bad_input", f"cannot start the run: {_line(exc)}") from None
    if found.worker is not None:
        found.worker.sweeper.wake()  # (a store of this process only: no notice reaches it)
    run = await found.store.get_run(run_id)
    answer = {
        "run_id": run.id,
        "flow": run.flow_id,
        "version": run.flow_version,
        "lifecycle": run.lifecycle,
        "deadline": run.deadline,
    }
    return JSONResponse(jsonable(answer), status_code=201)


async def _exists(found: Services, run_id: str) -> bool:
    try:
        await found.store.get_run(run_id)
    except UnknownRunError:
        return False
    return True


def _line(exc: Exception) -> str:
    return " ".join(str(exc).split())


@router.get("")
async def list_runs(
    found: Annotated[Services, Depends(services)],
    lifecycle: Annotated[
        Lifecycle | None, Query(description="Only runs in this lifecycle.")
    ] = None,
    flow: Annotated[str | None, Query(description="Only runs of this flow id.")] = None,
    limit: Annotated[int, Query(ge=1, le=MOST_LISTED)] = 50,
    after: Annotated[
        str | None, Query(description="The page after this run (the last of the page before).")
    ] = None,
) -> dict[str, Any]:
    """Runs, newest first, a page at a time: ``next`` names the run to ask ``after`` for the
    next page (null: none)."""
    summaries = await found.client.runs(
        lifecycle=lifecycle.value if lifecycle is not None else None, flow_id=flow, limit=None
    )
    ids = [s.run_id for s in summaries]
    start = 0
    if after is not None:
        if after not in ids:
            raise ApiError(400, "bad_input", f"after: no run {after!r} in this listing")
        start = ids.index(after) + 1
    page = ids[start : start + limit]
    store = found.store
    beats = list(await store.workers())
    rows = [await run_row(store, await store.get_run(run_id), beats) for run_id in page]
    listed = []
    for row in rows:
        full = run_json(*row)
        listed.append(
            {
                key: full[key]
                for key in (
                    "run_id",
                    "flow",
                    "version",
                    "lifecycle",
                    "outcome",
                    "created_at",
                    "deadline",
                    "next_deadline",
                    "waiting_for",
                )
            }
            | {"where": [_where(t) for t in full["tokens"]]}
        )
    more = start + limit < len(ids)
    return {"runs": jsonable(listed), "next": page[-1] if more and page else None}


def _where(token: dict[str, Any]) -> dict[str, Any]:
    return {k: token[k] for k in ("placement", "status", "deadline")}


@router.get("/{run}")
async def get_run(run: str, found: Annotated[Services, Depends(services)]) -> dict[str, Any]:
    """One run as ``flowtide show --json`` gives it, with the Mermaid source of its flow
    version."""
    run_id = await found.run_id(run)
    data = await run_detail(found.store, run_id)
    record = await found.store.get_run(run_id)
    digest = record.options.get("flow_digest")
    data["mermaid"] = await _mermaid(found, record.flow_id, digest)
    return jsonable(data)  # type: ignore[no-any-return]


async def _mermaid(found: Services, flow_id: str, digest: object) -> str | None:
    """The diagram of a stored flow version (kept: a version's document never changes)."""
    if not isinstance(digest, str):
        return None
    drawn: dict[tuple[str, str], str] = found.extras.setdefault("mermaid", {})
    if (flow_id, digest) not in drawn:
        try:
            stored = await found.store.get_flow(flow_id, digest)
        except UnknownStoredFlow:
            return None
        if len(drawn) >= MOST_DRAWN:
            drawn.clear()
        drawn[flow_id, digest] = render_mermaid(flow_from_stored(stored))
    return drawn[flow_id, digest]


@router.get("/{run}/history")
async def get_history(run: str, found: Annotated[Services, Depends(services)]) -> dict[str, Any]:
    """The run's events, in order, as ``flowtide history --json`` gives them."""
    run_id = await found.run_id(run)
    return {"events": [event_json(e) for e in await found.client.history(run_id)]}


@router.get("/{run}/explain")
async def get_explain(
    run: str,
    found: Annotated[Services, Depends(services)],
    placement: Annotated[str | None, Query(description="This placement's window only.")] = None,
) -> dict[str, Any]:
    """How the run's deadlines were computed, as ``flowtide explain --json`` gives them."""
    run_id = await found.run_id(run)
    try:
        if placement is not None:
            explained = [await found.client.explain(run_id, placement)]
        else:
            explained = await found.client.explain_run(run_id)
    except EngineError as exc:
        raise ApiError(400, "bad_input", _line(exc)) from None
    return {"explanations": jsonable([dataclasses.asdict(e) for e in explained])}
