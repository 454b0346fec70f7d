"""``/api/whatif``: a flow's last recorded runs played again with edited node settings (see
:func:`flowtide.simulation.whatif`), and, with ``save``, the edited version registered."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from flowtide.client.views import registered_json
from flowtide.server.auth import writer
from flowtide.server.errors import ApiError
from flowtide.server.services import Services, services
from flowtide.simulation.edits import register_edited
from flowtide.simulation.whatif import DEFAULT_LAST, whatif
from flowtide.store.base import UnknownStoredFlow

__all__ = ["router"]

router = APIRouter(prefix="/api/whatif", tags=["what-if"])

MOST_RUNS = 1000
"""The most runs one what-if plays again (each is played twice)."""


class WhatIfBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flow: str = Field(min_length=1, description="The id of a flow stored in the store.")
    set: dict[str, Any] = Field(
        min_length=1,
        description='Edits of node settings: {"<placement>.<setting>": value}, settings of '
        "the node-settings schema (timeout, timeout_anchor, release_on, timers, retry).",
    )
    last: int = Field(DEFAULT_LAST, ge=1, le=MOST_RUNS, description="How many runs, latest first.")
    save: bool = Field(False, description="Also register the edited flow as a new version.")


@router.post("")
async def what_if(
    body: WhatIfBody,
    found: Annotated[Services, Depends(services)],
    _who: Annotated[str, Depends(writer)],
) -> dict[str, Any]:
    """What the edits would have done to the flow's last recorded runs: per placement, the runs
    that would have expired or no longer would, reminders and retries more or fewer, outcomes
    changed, and the runs that could not be played again (and why). Bad edits: 422, located,
    nothing played or saved."""
    try:
        report = await whatif(found.store, body.flow, body.set, body.last)
        answer: dict[str, Any] = {"report": report.to_json(), "summary": report.lines()}
        if body.save:
            saved = await register_edited(found.store, body.flow, body.set)
            answer["saved"] = registered_json(saved)
    except UnknownStoredFlow:
        raise ApiError(404, "unknown_flow", f"no flow {body.flow!r} is stored") from None
    return answer
