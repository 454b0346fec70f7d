"""A new run, as a decision: its record and state, made from the flow it runs and what the
caller asked, before anything is stored."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.timing.deadlines import run_deadline
from flowtide.model.flow import Flow
from flowtide.store.base import RunRecord
from flowtide.store.jsonvalues import EncodedState, decode_json

__all__ = ["new_run"]


def new_run(
    flow: Flow,
    digest: str,
    children: dict[str, str],
    now: datetime,
    input: Mapping[str, str],
    deadline: timedelta | datetime | str | int | None,
    run_id: str | None,
    entrypoint: str | None,
) -> tuple[RunRecord, EncodedState]:
    """The record of a new run of ``flow`` (lifecycle ``pending``, created ``now``) and its
    state: the input, given as each value's JSON text (checked already), read back as a store
    keeps it (new objects, tuples as lists) and carrying that text for the store. The record
    names the flow's document (``digest``) and those of the flows it runs (``children``, id ->
    digest), so that whichever worker drives the run plans it from the very documents it started
    on. ``deadline``: the run's own, else the flow's."""
    run = RunRecord(
        id=run_id or uuid.uuid4().hex,
        flow_id=flow.id,
        flow_version=flow.version,
        lifecycle=Lifecycle.PENDING.value,
        created_at=now,
        deadline=run_deadline(deadline if deadline is not None else flow.deadline, now),
        options={"entrypoint": entrypoint, "flow_digest": digest, "flows": children},
    )
    state = EncodedState({key: decode_json(text) for key, text in input.items()})
    state.json.update(input)
    return run, state
