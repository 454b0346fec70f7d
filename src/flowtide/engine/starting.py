"""A new run, as a decision: its record and state, made from the flow it runs and what the
caller asked, before anything is stored."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from flowtide.engine.deadlines import run_deadline
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.reducers import copy_state, stored_form
from flowtide.model.flow import Flow
from flowtide.store.base import RunRecord

__all__ = ["new_run"]


def new_run(
    flow: Flow,
    digest: str,
    children: dict[str, str],
    now: datetime,
    input: Mapping[str, Any],
    deadline: timedelta | datetime | str | int | None,
    run_id: str | None,
    entrypoint: str | None,
) -> tuple[RunRecord, dict[str, Any]]:
    """The record of a new run of ``flow`` (lifecycle ``pending``, created ``now``) and its
    state: ``input`` as a store keeps it (tuples as lists). The record names the flow's
    document (``digest``) and those of the flows it runs (``children``, id -> digest), so that
    whichever worker drives the run plans it from the very documents it started on.
    ``deadline``: the run's own, else the flow's."""
    run = RunRecord(
        id=run_id or uuid.uuid4().hex,
        flow_id=flow.id,
        flow_version=flow.version,
        lifecycle=Lifecycle.PENDING.value,
        created_at=now,
        deadline=run_deadline(deadline if deadline is not None else flow.deadline, now),
        options={"entrypoint": entrypoint, "flow_digest": digest, "flows": children},
    )
    return run, {k: stored_form(v) for k, v in copy_state(input).items()}
