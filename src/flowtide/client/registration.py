"""Registering flows: each document checked as ``flowtide validate`` checks it (no node code is
imported), with the flows stored already known to its subflows, then stored, all or nothing."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flowtide.client.results import RegisteredFlow
from flowtide.documents import load_flow
from flowtide.engine.flows.stored_flows import flow_from_stored, stored_flow
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow
from flowtide.store.base import Store
from flowtide.validation import check_flow

__all__ = ["FlowSource", "checked", "register_flows", "stored_catalog"]

FlowSource = Flow | str | os.PathLike[str] | bytes | Mapping[str, Any]
"""A flow, or its document: a path, the document's text or bytes, or its parsed data."""


async def stored_catalog(store: Store) -> dict[str, Flow]:
    """The latest stored flow of every id (what a subflow of a registered flow may name)."""
    latest = [v for v in await store.flow_versions() if v.latest]
    return {v.flow_id: flow_from_stored(await store.get_flow(v.flow_id, v.digest)) for v in latest}


def checked(sources: Sequence[FlowSource], known: Mapping[str, Flow]) -> list[Flow]:
    """The flows of ``sources``, in order, each checked with ``known`` and the others known, so
    that they may name each other as subflows in any order (raises
    :class:`FlowValidationError` naming every problem of every document that does not load)."""
    catalog = dict(known)
    found: dict[int, Flow] = {}
    problems: dict[int, list[Problem]] = {}
    while len(found) < len(sources):
        before = len(found)
        for n, source in enumerate(sources):
            if n in found:
                continue
            try:
                flow = _checked(source, catalog)
            except FlowValidationError as exc:
                problems[n] = list(exc.problems)
                continue
            found[n] = catalog[flow.id] = flow
            problems.pop(n, None)
        if len(found) == before:
            raise FlowValidationError(
                [p for n in sorted(problems) for p in problems[n]], title="invalid flow document"
            )
    return [found[n] for n in range(len(sources))]


async def register_flows(
    store: Store, flows: Iterable[Flow], now: datetime
) -> list[RegisteredFlow]:
    """Put each flow's document in the store, first stored ``now`` if it is new."""
    done = []
    for flow in flows:
        kept = stored_flow(flow)
        new = await store.put_flow(kept, stored_at=now)
        done.append(RegisteredFlow(kept.flow_id, kept.version, kept.digest, new))
    return done


def _checked(source: FlowSource, catalog: Mapping[str, Flow]) -> Flow:
    if not isinstance(source, Flow):
        return load_flow(source, catalog=catalog)
    errors = [p for p in check_flow(source, catalog=catalog) if p.severity == "error"]
    if errors:
        raise FlowValidationError(errors)
    return source
