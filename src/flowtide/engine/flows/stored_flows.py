"""Flows kept in the store: each run records the digest of the document it was started on, and
any engine on the store resumes it from that very document.

A flow's digest is the SHA-256 of its native document as canonical JSON (keys sorted, no
spaces). Two documents of one flow id and version that differ are two stored flows: a run in
flight keeps the document it started on, whatever is started after it.
"""

from __future__ import annotations

import hashlib
import json

from flowtide.authoring.nodes import registry
from flowtide.engine.flows.plan import TypeLookup
from flowtide.model.flow import Flow, node_ref
from flowtide.model.nodes import NodeType
from flowtide.store.base import StoredFlow

__all__ = ["flow_from_stored", "flows_named", "registered_type", "stored_flow", "undeclared_types"]


def registered_type(ref: str) -> NodeType | None:
    """The type of the node registered under ``ref`` in the process-wide registry, if any."""
    found = registry.get(ref)
    return found.type if found is not None else None


def undeclared_types(flow: Flow, implemented: TypeLookup = registered_type) -> list[NodeType]:
    """The types ``implemented`` knows of the nodes ``flow`` runs and does not declare (their
    outputs, whether they park, their default settings and output schemas)."""
    added: dict[str, NodeType] = {}
    for p in flow.placements:
        ref = node_ref(p)
        if ref is None or ref in added or flow.node_type(ref) is not None:
            continue
        found = implemented(ref)
        if found is not None:
            added[ref] = found
    return list(added.values())


def stored_flow(flow: Flow, implemented: TypeLookup = registered_type) -> StoredFlow:
    """``flow`` as the store keeps it: its native document and that document's digest. The
    document declares the type of every node the flow runs that is registered here, so that a
    client without the nodes' code knows them; a type the flow declares already is kept."""
    document = flow.to_data()
    added = undeclared_types(flow, implemented)
    if added:
        declared = [*document.get("node_types", ())]
        declared.extend(t.model_dump(mode="json", exclude_defaults=True) for t in added)
        document = {**document, "node_types": declared}
        document = {k: document[k] for k in Flow.model_fields if k in document}
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
