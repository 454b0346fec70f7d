"""What the checks look at: a flow, where its parts are in the document, and what is known.

A :class:`Subject` wraps a :class:`Flow` with what the checks need besides it: the node types
known from a registry, the flows known from a catalog, and, for a document that was only partly
readable, where each readable placement sits in the document and which placements could not be
read (so that a route to one of those is not reported as a route to a missing placement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flowtide.authoring.nodes import NodeRegistry
from flowtide.model.flow import Flow, node_ref
from flowtide.model.nodes import NodeType
from flowtide.model.placements import RESERVED_OUTPUTS, TIMEOUT_OUTPUT, AnyPlacement, Task
from flowtide.model.settings import NodeSettings
from flowtide.validation.pointers import pointer


def _same(pointer: str) -> str:
    return pointer


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A placement that is in the document but could not be read (its problems are reported).

    ``edges`` are the routes that could still be read from it, as ``(output, target)`` pairs;
    ``routes_known`` is false when its routes could not be read at all.
    """

    index: int
    id: str | None = None
    kind: str | None = None
    edges: tuple[tuple[str, str], ...] = ()
    routes_known: bool = True


@dataclass(frozen=True, slots=True)
class DeclaredType:
    """A node type and where it comes from: its pointer in the document, or ``None``."""

    type: NodeType
    pointer: str | None


@dataclass
class Subject:
    flow: Flow
    catalog: Mapping[str, Flow] = field(default_factory=dict)
    registry: NodeRegistry | None = None
    #: Index in the document's ``placements`` of each of ``flow.placements`` (default: the same).
    indices: Sequence[int] | None = None
    #: Index in the document's ``node_types`` of each of ``flow.node_types`` (default: the same).
    node_type_indices: Sequence[int] | None = None
    unreadable: Sequence[Unreadable] = ()
    #: Ids of node types the document declares but that could not be read.
    unreadable_node_types: frozenset[str] = frozenset()
    #: False when the entrypoints could not be read: checks that start from them are skipped.
    entrypoints_known: bool = True
    #: The document's placements as data, when checking a document (to point at list items).
    raw_placements: Sequence[Any] | None = None
    #: Turns a pointer into native data into one into the document as written (for pointers a
    #: message names; a problem's own pointer is turned when the problem is reported).
    source_pointer: Callable[[str], str] = _same

    # -- where things are ------------------------------------------------------------------

    def index(self, position: int) -> int:
        return self.indices[position] if self.indices is not None else position

    def at(self, position: int, *parts: object) -> str:
        """The pointer to ``parts`` inside the placement at ``position`` in ``flow.placements``."""
        return pointer("placements", self.index(position), *parts)

    def route_at(self, position: int, output: str, item: int) -> str:
        """The pointer to target ``item`` of route ``output`` of a placement."""
        placement = self.flow.placements[position]
        targets = placement.route_map().get(output, ())
        listed = len(targets) > 1
        raw = self._raw_route(position, output)
        if raw is not None:
            listed = isinstance(raw, list)
        if listed:
            return self.at(position, "routes", output, item)
        return self.at(position, "routes", output)

    def _raw_route(self, position: int, output: str) -> object | None:
        if self.raw_placements is None:
            return None
        index = self.index(position)
        if not 0 <= index < len(self.raw_placements):
            return None
        item = self.raw_placements[index]
        routes = item.get("routes") if isinstance(item, Mapping) else None
        return routes.get(output) if isinstance(routes, Mapping) else None

    def node_type_at(self, position: int, *parts: object) -> str:
        index = self.node_type_indices[position] if self.node_type_indices else position
        return pointer("node_types", index, *parts)

    # -- placements and edges --------------------------------------------------------------

    def positions(self) -> Iterator[tuple[int, AnyPlacement]]:
        return enumerate(self.flow.placements)

    @cached_property
    def ids(self) -> frozenset[str]:
        """Every placement id in the document, readable or not."""
        found = {p.id for p in self.flow.placements}
        found.update(u.id for u in self.unreadable if u.id is not None)
        return frozenset(found)

    @cached_property
    def unreadable_ids(self) -> frozenset[str]:
        return frozenset(u.id for u in self.unreadable if u.id is not None)

    @property
    def routes_known(self) -> bool:
        """False when some placement's routes could not be read (the graph may lack edges)."""
        return all(u.routes_known and (u.id is not None or not u.edges) for u in self.unreadable)

    def edges(self) -> Iterator[tuple[str, str, str]]:
        """Every route as ``(source id, output, target id)``, unreadable placements included."""
        for p in self.flow.placements:
            for output, targets in p.route_map().items():
                for target in targets:
                    yield p.id, output, target
        for u in self.unreadable:
            if u.id is not None:
                for output, target in u.edges:
                    yield u.id, output, target

    # -- node types and settings -----------------------------------------------------------

    @cached_property
    def _declared_positions(self) -> dict[str, int]:
        """The position of each node type id's first declaration in ``flow.node_types``."""
        positions: dict[str, int] = {}
        for position, declared in enumerate(self.flow.node_types):
            positions.setdefault(declared.id, position)
        return positions

    def node_type(self, ref: str) -> DeclaredType | None:
        """The node type for ``ref``: declared by the document, else from the registry."""
        position = self._declared_positions.get(ref)
        if position is not None:
            return DeclaredType(self.flow.node_types[position], self.node_type_at(position))
        if self.registry is not None:
            impl = self.registry.get(ref)
            if impl is not None:
                return DeclaredType(impl.type, None)
        return None

    def node_of(self, placement: AnyPlacement) -> DeclaredType | None:
        ref = getattr(placement, "node", None)
        return self.node_type(ref) if isinstance(ref, str) else None

    def effective_settings(self, placement: AnyPlacement) -> NodeSettings:
        """The settings the engine will apply (see :meth:`Flow.settings_at`), with a registered
        implementation's own defaults as the farthest layer."""
        ref = node_ref(placement)
        impl = self.registry.get(ref) if self.registry is not None and ref is not None else None
        return self.flow.settings_at(placement, defaults=impl.type.settings if impl else None)

    def outputs(self, placement: AnyPlacement) -> frozenset[str] | None:
        """Every output ``placement`` can take (``None`` when its node type is unknown)."""
        timers = self.effective_settings(placement).timers or ()
        timer_outputs = {t.output for t in timers}
        if isinstance(placement, Task):
            declared = self.node_of(placement)
            if declared is None:
                return None
            return frozenset(declared.type.outputs) | RESERVED_OUTPUTS | timer_outputs
        outputs = set(placement.fixed_outputs)
        if placement.has_settings:
            outputs.add(TIMEOUT_OUTPUT)
            outputs |= timer_outputs
        return frozenset(outputs)
