"""Flows kept in the store: each run records the digest of the document it was started on, and
any engine on the store resumes it from that very document.

A flow's digest is the SHA-256 of its native document as canonical JSON (keys sorted, no
spaces). Two documents of one flow id and version that differ are two stored flows: a run in
flight keeps the document it started on, whatever is started after it.
"""

from __future__ import annotations

import hashlib
import json

from flowtide.model.flow import Flow
from flowtide.store.base import StoredFlow

__all__ = ["flow_from_stored", "flows_named", "stored_flow"]


def stored_flow(flow: Flow) -> StoredFlow:
    """``flow`` as the store keeps it: its native document and that document's digest."""
    document = flow.to_data()
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return StoredFlow(flow.id, flow.version, digest, document)


def flow_from_stored(stored: StoredFlow) -> Flow:
    """The flow a stored document describes. The document was checked when its run started; the
    flows its subflows run are stored beside it, so it is read as it is, not checked against
    a catalog of flows."""
    return Flow.model_validate(stored.document)


def flows_named(flow: Flow) -> set[str]:
    """The ids of the flows ``flow`` runs itself (its subflows and scatter bodies)."""
    found = set()
    for p in flow.placements:
        body = getattr(p, "body", None)
        name = getattr(p, "flow", None) or getattr(body, "flow", None)
        if isinstance(name, str):
            found.add(name)
    return found
