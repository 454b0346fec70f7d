"""Writing a flow as canonical JSON-LD.

The DAG vocabulary's terms and classes say what that vocabulary has (a dumped document written
for it looks like the original), Flowtide's terms say the rest, and the full context travels
inline so the document stands on its own. Joins are written as Flowtide ``Join``: the DAG
vocabulary's ``GatherNode`` means a different fan-in (declared sources, gather strategies) that a
Flowtide join does not have.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from flowtide.documents.vocabulary import CLASS_OF_KIND, FLOWTIDE_CONTEXT
from flowtide.model.durations import format_duration
from flowtide.model.flow import Flow
from flowtide.model.placements import (
    AnyPlacement,
    FailurePolicy,
    Gather,
    Join,
    Phase,
    Scatter,
    Subflow,
    Task,
    Terminal,
    Wait,
)

_MS = timedelta(milliseconds=1)


def to_jsonld(flow: Flow) -> dict[str, Any]:
    """The flow as a canonical JSON-LD document (a fresh dict, the context inline)."""
    data = flow.to_data()
    doc: dict[str, Any] = {
        "@context": copy.deepcopy(FLOWTIDE_CONTEXT),
        "@id": flow.id,
        "@type": "DAG",
    }
    if flow.name is not None:
        doc["name"] = flow.name
    doc["version"] = flow.version
    if flow.description is not None:
        doc["description"] = flow.description
    doc["entrypoints"] = {
        label: flow.placement_iri(target) for label, target in flow.entrypoints.items()
    }
    doc["nodes"] = [
        _placement(flow, p, d) for p, d in zip(flow.placements, data["placements"], strict=True)
    ]
    for key, term in (
        ("node_types", "nodeTypes"),
        ("reducers", "reducers"),
        ("deadline", "deadline"),
        ("max_depth", "maxDepth"),
    ):
        if key in data:
            doc[term] = data[key]
    return doc


def _placement(flow: Flow, p: AnyPlacement, data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"@id": flow.placement_iri(p.id), "@type": _class_term(p.kind)}
    if p.name is not None:
        out["name"] = p.name
    if p.description is not None:
        out["description"] = p.description
    if isinstance(p, Task):
        out["node"] = p.node
    elif isinstance(p, Phase):
        out["node"] = p.node
        out["phase"] = p.phase.value
    elif isinstance(p, Terminal):
        out["outcome"] = p.outcome
    elif isinstance(p, Wait):
        _copy(data, out, ("duration", "until"))
    elif isinstance(p, Join):
        out["mode"] = p.mode.value
        _copy(data, out, ("quorum",))
    elif isinstance(p, Scatter):
        _scatter(p, data, out)
    elif isinstance(p, Subflow):
        out["dag"] = p.flow
        mapping = {k: data[k] for k in ("input", "output") if k in data}
        if mapping:
            out["stateMapping"] = mapping
    if not isinstance(p, Terminal | Phase):
        out["outputs"] = {
            output: [flow.placement_iri(t) for t in targets]
            if len(targets) > 1
            else flow.placement_iri(targets[0])
            for output, targets in p.route_map().items()
        }
    out.update(data.get("settings", {}))
    return out


def _class_term(kind: str) -> str:
    iri = CLASS_OF_KIND[kind]
    return iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1]


def _copy(data: dict[str, Any], out: dict[str, Any], keys: tuple[str, ...]) -> None:
    out.update((k, data[k]) for k in keys if k in data)


def _scatter(p: Scatter, data: dict[str, Any], out: dict[str, Any]) -> None:
    if p.source is not None:
        out["source"] = p.source
    else:
        out["sourceFn"] = p.source_fn
    out["itemKey"] = p.item_key
    out["body"] = {"node": p.body.node} if p.body.node is not None else {"dag": p.body.flow}
    if p.input:
        out["stateMapping"] = {"input": dict(p.input)}
    execution: dict[str, Any] = {}
    if p.batch is not None:
        reservoir: dict[str, Any] = {"keyField": p.batch.key, "capacity": p.batch.size}
        if p.batch.idle is not None:
            if p.batch.idle % _MS:
                reservoir["idle"] = format_duration(p.batch.idle)
            else:
                reservoir["idleMs"] = p.batch.idle // _MS
        execution = {"mode": "reservoir", "concurrency": p.concurrency, "reservoir": reservoir}
    elif p.concurrency != 1 or p.throttle is not None:
        execution = {"mode": "item", "concurrency": p.concurrency}
        if p.throttle is not None:
            execution["throttle"] = p.throttle
    if execution:
        out["execution"] = execution
    if p.gather != Gather():
        out["gather"] = p.gather.model_dump(mode="json", exclude_defaults=True)
    if p.on_failure is not FailurePolicy.CONTINUE:
        out["onFailure"] = p.on_failure.value
