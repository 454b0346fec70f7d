"""Checks of a flow as a whole: every problem, located, in one pass.

``build_flow`` turns native document data (the shape :meth:`Flow.to_data` writes) into a
:class:`Flow`, collecting every structural problem; ``check_flow`` checks the graph of a built flow.
Both report :class:`~flowtide.errors.Problem` values; neither raises on bad input.

Each check is a small function of a :class:`~flowtide.validation.subject.Subject` (the flow and
what is known around it) in the module of its idea: :mod:`.graph`, :mod:`.outputs`,
:mod:`.settings`, :mod:`.references`; :mod:`.structure` reads document data part by part.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from flowtide.authoring.nodes import NodeRegistry
from flowtide.errors import Problem
from flowtide.model.flow import Flow
from flowtide.validation import graph, loops, outputs, references, settings, structure
from flowtide.validation.subject import Subject

PointerMap = Callable[[str], str]
"""Turns a pointer into native data into a pointer into the source document."""

Check = Callable[[Subject], Iterator[Problem]]

CHECKS: tuple[Check, ...] = (
    graph.duplicate_ids,
    graph.entrypoints,
    graph.route_targets,
    graph.terminals,
    graph.unreachable,
    graph.dead_ends,
    graph.joins,
    outputs.undeclared_nodes,
    outputs.routed_outputs,
    outputs.unrouted_outputs,
    settings.release_outputs,
    settings.anchors,
    settings.timer_routes,
    settings.timeout_routes,
    settings.timers_before_timeout,
    references.flows,
    references.node_type_ids,
    references.reducers,
    loops.unbounded_parking_loops,
)
"""Every check ``check_flow`` runs, in order."""

__all__ = ["CHECKS", "PointerMap", "build_flow", "check_flow", "run_checks"]


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
    read = structure.read(data)
    problems = list(read.problems)
    if read.partial is not None:
        subject = Subject(
            read.partial,
            catalog=catalog or {},
            registry=registry,
            indices=read.indices,
            node_type_indices=read.node_type_indices,
            unreadable=read.unreadable,
            unreadable_node_types=frozenset(read.unreadable_node_types),
            entrypoints_known=read.entrypoints_known,
            raw_placements=read.raw_placements,
            source_pointer=pointer_map,
        )
        problems.extend(run_checks(subject))
    problems = [dataclasses.replace(p, pointer=pointer_map(p.pointer)) for p in _unique(problems)]
    if read.flow is None or any(p.severity == "error" for p in problems):
        return None, problems
    return read.flow, problems


def check_flow(
    flow: Flow,
    *,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> list[Problem]:
    """Every problem with ``flow`` (errors and warnings); an empty list when it is sound."""
    return run_checks(Subject(flow, catalog=catalog or {}, registry=registry))


def run_checks(subject: Subject, checks: Iterable[Check] = CHECKS) -> list[Problem]:
    """The problems ``checks`` find in ``subject``, each once."""
    return _unique(problem for check in checks for problem in check(subject))


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
