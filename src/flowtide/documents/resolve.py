"""Binding a loaded flow's node references to Python code.

A document names nodes by the ids they are registered under (an IRI, or a ``@node``'s default
``module:qualname``); running it needs the implementations. Nothing is imported because a document
names it. All references are resolved at once so that every missing one is reported, each with
the placements that use it.
"""

from __future__ import annotations

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
from flowtide.authoring.nodes import registry as default_registry
from flowtide.documents.pointers import join
from flowtide.errors import FlowValidationError, NodeResolutionError, Problem
from flowtide.model.flow import Flow
from flowtide.model.placements import Phase, Scatter, Task


def node_references(flow: Flow) -> dict[str, list[tuple[int, str]]]:
    """Each node reference of ``flow`` -> the (index, pointer suffix) of placements using it."""
    refs: dict[str, list[tuple[int, str]]] = {}
    for index, p in enumerate(flow.placements):
        if isinstance(p, Task | Phase):
            refs.setdefault(p.node, []).append((index, "node"))
        elif isinstance(p, Scatter) and p.body.node is not None:
            refs.setdefault(p.body.node, []).append((index, "body/node"))
    return refs


def resolve_nodes(
    flow: Flow, registry: NodeRegistry | None = None
) -> dict[str, NodeImplementation]:
    """Every node reference of ``flow`` -> its implementation, registered in ``registry`` or the
    process-wide registry (where ``@node`` registers).

    Raises :class:`~flowtide.errors.FlowValidationError` naming each placement whose node does not
    resolve. Pointers are into the native shape (``/placements/<n>/node``).
    """
    found: dict[str, NodeImplementation] = {}
    problems: list[Problem] = []
    for ref, uses in node_references(flow).items():
        impl = registry.get(ref) if registry is not None else None
        try:
            found[ref] = impl if impl is not None else default_registry.resolve(ref)
        except NodeResolutionError as exc:
            reason = str(exc)
        else:
            continue
        for index, suffix in uses:
            placement = flow.placements[index].id
            problems.append(
                Problem(
                    reason, pointer=join("/placements", index) + "/" + suffix, placement=placement
                )
            )
    if problems:
        raise FlowValidationError(problems, title=f"unresolved nodes in flow {flow.id!r}")
    return found
