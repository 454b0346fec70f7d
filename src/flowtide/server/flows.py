"""``/api/flows``: the flows in the store, one flow's versions, diagram and settings, and
registering a flow document."""

from __future__ import annotations

import json
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse

from flowtide.client.views import registered_json, version_json
from flowtide.engine.flows.stored_flows import flow_from_stored
from flowtide.model.schemas import node_settings_schema
from flowtide.render.mermaid import effective_settings, render_mermaid
from flowtide.server.auth import writer
from flowtide.server.errors import ApiError
from flowtide.server.services import Services, jsonable, services
from flowtide.store.base import UnknownStoredFlow

__all__ = ["router"]

router = APIRouter(prefix="/api/flows", tags=["flows"])

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")

FLOW_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/yaml": {"schema": {"type": "string"}},
        },
    }
}


@router.get("")
async def list_flows(found: Annotated[Services, Depends(services)]) -> dict[str, Any]:
    """Every stored version of every flow, oldest first by id (the last of an id is its
    latest)."""
    versions = await found.client.flows()
    return {"flows": [jsonable(version_json(v)) for v in versions]}


@router.post("", status_code=201, openapi_extra=FLOW_BODY)
async def register_flow(
    request: Request,
    found: Annotated[Services, Depends(services)],
    _who: Annotated[str, Depends(writer)],
) -> JSONResponse:
    """Check a flow document (JSON, or YAML text) as ``flowtide validate`` does and store it;
    a document with errors: 422 with every problem located."""
    document = _document(await request.body(), request.headers.get("content-type", ""))
    (done,) = await found.client.register(document)
    return JSONResponse(registered_json(done), status_code=201)


def _document(body: bytes, content_type: str) -> dict[str, Any]:
    is_yaml = content_type.split(";")[0].strip().lower() in YAML_TYPES
    try:
        text = body.decode("utf-8")
        data = yaml.safe_load(text) if is_yaml else json.loads(text)
    except UnicodeDecodeError:
        raise ApiError(400, "bad_input", "the body is not UTF-8 text") from None
    except (ValueError, yaml.YAMLError) as exc:
        what = "YAML" if is_yaml else "JSON"
        line = str(exc).splitlines()[0] if str(exc) else "cannot be read"
        raise ApiError(400, "bad_input", f"the body is not {what}: {line}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_input", "the body must be a flow document (an object)")
    return data


@router.get("/{flow_id:path}")
async def get_flow(
    flow_id: Annotated[str, Path(description="The flow's id (an IRI), path-encoded.")],
    found: Annotated[Services, Depends(services)],
) -> dict[str, Any]:
    """One flow: its versions, its latest document, the Mermaid source of its diagram, each
    placement's effective node settings, and the node-settings JSON Schema."""
    versions = await found.client.flows(flow_id)
    if not versions:
        raise ApiError(404, "unknown_flow", f"no flow {flow_id!r} is stored")
    try:
        stored = await found.store.latest_flow(flow_id)
    except UnknownStoredFlow:
        raise ApiError(404, "unknown_flow", f"no flow {flow_id!r} is stored") from None
    flow = flow_from_stored(stored)
    settings = {}
    for placement in flow.placements:
        effective = effective_settings(flow, placement)
        if effective is not None:
            settings[placement.id] = effective.model_dump(mode="json", exclude_none=True)
    return {
        "flow": flow_id,
        "versions": [jsonable(version_json(v)) for v in versions],
        "document": stored.document,
        "mermaid": render_mermaid(flow),
        "settings": settings,
        "settings_schema": node_settings_schema(),
    }
