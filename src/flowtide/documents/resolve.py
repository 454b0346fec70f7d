"""Binding a loaded flow's node references to Python code.

A document names nodes by IRI or ``module:attribute``; running it needs the implementations. All
references are resolved at once so that every missing one is reported, each with the placements
that use it.
"""

from __future__ import annotations

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
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
    """Every node reference of ``flow`` -> its implementation (registered, or imported).

    Raises :class:`~flowtide.errors.FlowValidationError` naming each placement whose node does not
    resolve. Pointers are into the native shape (``/placements/<n>/node``).
    """
    registry = registry if registry is not None else NodeRegistry()
    found: dict[str, NodeImplementation] = {}
    problems: list[Problem] = []
    for ref, uses in node_references(flow).items():
        try:
            found[ref] = registry.resolve(ref)
        except NodeResolutionError as exc:
            reason = str(exc)
        except Exception as exc:  # importing user code may raise anything
            reason = f"node {ref!r}: importing it failed: {type(exc).__name__}: {exc}"
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
