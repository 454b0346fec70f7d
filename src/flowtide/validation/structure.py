"""Structure: native document data read into a flow, part by part, every problem kept.

The top level, each placement and each node type are validated on their own, so that one broken
placement does not hide the others. What could be read is kept for the graph checks, together
with what is known of the parts that could not (their ids and the routes still readable), so that
those checks neither stop nor report what is only a consequence of a problem already reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from flowtide.errors import Problem
from flowtide.model.flow import Flow
from flowtide.model.nodes import NodeType
from flowtide.model.placements import KIND_NAMES, AnyPlacement, Placement, Terminal
from flowtide.validation.messages import translate
from flowtide.validation.pointers import pointer, short, type_name
from flowtide.validation.subject import Unreadable

_PLACEMENT: TypeAdapter[AnyPlacement] = TypeAdapter(Placement)
_KINDS = ", ".join(KIND_NAMES)
_STAND_IN = Terminal(id="flowtide:stand-in")
"""Stands for the placements while the top level is validated on its own."""


@dataclass
class Structure:
    """What a document's data holds, as far as it could be read."""

    problems: list[Problem] = field(default_factory=list)
    #: The flow, when the whole document is valid.
    flow: Flow | None = None
    #: The readable part, for graph checks (the flow itself when it is valid).
    partial: Flow | None = None
    indices: list[int] = field(default_factory=list)
    node_type_indices: list[int] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    unreadable_node_types: set[str] = field(default_factory=set)
    entrypoints_known: bool = True
    raw_placements: Sequence[Any] | None = None


def read(data: Any) -> Structure:
    """Read native flow data, collecting every structural problem."""
    out = Structure()
    if not isinstance(data, Mapping):
        what = "the document is empty" if data is None else f"not {type_name(data)}"
        out.problems.append(
            Problem(
                "a flow document must be a mapping with 'id', 'entrypoints' and 'placements', "
                + what
            )
        )
        return out
    top = dict(data)
    placements: list[AnyPlacement] = []
    raw = data.get("placements")
    if isinstance(raw, list) and raw:
        out.raw_placements = raw
        for index, item in enumerate(raw):
            placement = _read_placement(index, item, out)
            if placement is not None:
                placements.append(placement)
                out.indices.append(index)
        top["placements"] = placements or [_STAND_IN]
    node_types: list[NodeType] = []
    raw_types = data.get("node_types")
    if isinstance(raw_types, list):
        for index, item in enumerate(raw_types):
            declared = _read_node_type(index, item, out)
            if declared is not None:
                node_types.append(declared)
                out.node_type_indices.append(index)
        top["node_types"] = node_types
    flow: Flow | None = None
    try:
        flow = Flow.model_validate(top)
    except ValidationError as exc:
        top_problems = translate(exc, root=Flow)
        out.problems.extend(top_problems)
        out.entrypoints_known = not any(p.pointer.startswith("/entrypoints") for p in top_problems)
    if flow is not None:
        out.flow = None if out.problems else flow
        out.partial = flow if placements else None
        return out
    if placements:
        entrypoints = _text_mapping(data.get("entrypoints"))
        out.entrypoints_known = out.entrypoints_known and bool(entrypoints)
        flow_id = data.get("id")
        out.partial = Flow.model_construct(
            id=flow_id if isinstance(flow_id, str) and flow_id else "urn:flowtide:unnamed",
            entrypoints=entrypoints,
            placements=tuple(placements),
            node_types=tuple(node_types),
            reducers=_text_mapping(data.get("reducers")),
        )
    return out


def _read_placement(index: int, item: Any, out: Structure) -> AnyPlacement | None:
    at = ("placements", index)
    if not isinstance(item, Mapping):
        out.problems.append(
            Problem(
                f"a placement must be a mapping with 'id' and 'kind', not {type_name(item)}",
                pointer=pointer(*at),
            )
        )
        out.unreadable.append(Unreadable(index))
        return None
    raw_id = item.get("id")
    placement_id = raw_id if isinstance(raw_id, str) and raw_id else None
    kind = item.get("kind")
    if kind is None or kind not in KIND_NAMES:
        message = (
            f"a placement needs a 'kind' (kinds: {_KINDS})"
            if kind is None
            else f"unknown placement kind {short(kind)} (kinds: {_KINDS})"
        )
        out.problems.append(Problem(message, pointer=pointer(*at, "kind"), placement=placement_id))
    else:
        try:
            return _PLACEMENT.validate_python(item)
        except ValidationError as exc:
            out.problems.extend(translate(exc, at, placement=placement_id, drop_tag=True))
    edges, known = _raw_edges(item.get("routes"))
    out.unreadable.append(
        Unreadable(
            index,
            placement_id,
            kind if isinstance(kind, str) else None,
            edges,
            known,
        )
    )
    return None


def _read_node_type(index: int, item: Any, out: Structure) -> NodeType | None:
    try:
        return NodeType.model_validate(item)
    except ValidationError as exc:
        out.problems.extend(translate(exc, ("node_types", index), root=NodeType))
    if isinstance(item, Mapping) and isinstance(item.get("id"), str):
        out.unreadable_node_types.add(item["id"])
    return None


def _raw_edges(routes: Any) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The routes of an unreadable placement that can still be read, and whether all could."""
    if routes is None:
        return (), True
    if not isinstance(routes, Mapping):
        return (), False
    edges: list[tuple[str, str]] = []
    known = True
    for output, targets in routes.items():
        listed = [targets] if isinstance(targets, str) else targets
        if not isinstance(listed, list) or not all(isinstance(t, str) for t in listed):
            known = False
            continue
        edges.extend((str(output), t) for t in listed)
    return tuple(edges), known


def _text_mapping(raw: Any) -> dict[str, str]:
    """The entries of ``raw`` whose key and value are non-empty text."""
    if not isinstance(raw, Mapping):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and k and isinstance(v, str) and v}
