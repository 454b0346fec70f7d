"""Checks of a flow as a whole: every problem, located, in one pass."""

from __future__ import annotations

from collections.abc import Mapping

from flowtide.authoring.nodes import NodeRegistry
from flowtide.errors import Problem
from flowtide.model.flow import Flow


def check_flow(
    flow: Flow,
    *,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> list[Problem]:
    """Every problem with ``flow`` (errors and warnings); an empty list when it is sound."""
    return []
