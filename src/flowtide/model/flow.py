"""A flow: entrypoints, placements, declared node types and state reducers.

The model holds what a document says; graph-level rules (ids unique, routes lead somewhere, every
reachable part can end) are checked by :mod:`flowtide.validation`, which reports them all at once.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from flowtide.model.durations import Duration
from flowtide.model.nodes import NodeType
from flowtide.model.placements import (
    AnyPlacement,
    Phase,
    PhaseKind,
    Placement,
    Scatter,
    Task,
    Terminal,
)
from flowtide.model.scalars import Count
from flowtide.model.settings import NodeSettings

BUILTIN_REDUCERS = ("last", "append", "extend", "merge", "sum")
"""How parallel writes to one state key can merge, besides a reducer of your own (the id it is
registered under with ``@flowtide.reducer``, ``module:function`` in form)."""

DEFAULT_MAX_DEPTH = 32
"""How deep subflows may nest (a flow embedding itself counts each level)."""
MAX_SUBFLOW_DEPTH = 100
"""The most a flow may set ``max_depth`` to: each level is a child run of its own, so a flow
that calls itself without end makes runs until this stops it."""

SubflowDepth = Annotated[
    Count,
    Field(le=MAX_SUBFLOW_DEPTH),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_SUBFLOW_DEPTH}),
]


class Flow(BaseModel):
    """A flow: its id and version, its entrypoints, its placements and what they share (node
    types, reducers, a run deadline), as built in Python or loaded from a document."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    id: str = Field(min_length=1, description="The flow's IRI, such as 'urn:shop:flow:checkout'.")
    version: str = Field(
        default="1",
        min_length=1,
        description="A label of this version of the flow (a number is taken as text).",
        json_schema_extra={"type": ["string", "number"]},
    )
    name: str | None = Field(default=None, description="A display name.")
    description: str | None = None
    entrypoints: dict[str, str] = Field(
        min_length=1,
        description="Entrypoint label -> placement id ('main' is the default).",
        json_schema_extra={
            "propertyNames": {"minLength": 1},
            "additionalProperties": {"type": "string", "minLength": 1},
        },
    )
    placements: tuple[Placement, ...] = Field(min_length=1)
    node_types: tuple[NodeType, ...] = Field(
        default=(), description="Node contracts declared by the document."
    )
    reducers: dict[str, str] = Field(
        default_factory=dict,
        description="State key -> how parallel writes merge: 'last' (default), 'append', "
        "'extend', 'merge', 'sum', or the id of a registered reducer (@flowtide.reducer, "
        "'module:function').",
        json_schema_extra={
            "additionalProperties": {
                "anyOf": [
                    {"enum": list(BUILTIN_REDUCERS)},
                    {"type": "string", "pattern": "^[^:]+:[\\s\\S]+$"},
                ]
            }
        },
    )
    deadline: Duration | None = Field(default=None, description="Default run deadline.")
    max_depth: SubflowDepth = Field(
        default=DEFAULT_MAX_DEPTH,
        description=f"Subflow nesting limit (at most {MAX_SUBFLOW_DEPTH}).",
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        # YAML reads `version: 1` as a number; a version is a label, so take it as text.
        if isinstance(v, int | float) and not isinstance(v, bool):
            return str(v)
        return v

    @field_validator("entrypoints")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for label, target in v.items():
            if not label:
                raise ValueError("an entrypoint label must not be empty")
            if not target:
                raise ValueError(f"entrypoint {label!r} names no placement")
        return v

    @cached_property
    def _by_id(self) -> dict[str, AnyPlacement]:
        index: dict[str, AnyPlacement] = {}
        for p in self.placements:
            index.setdefault(p.id, p)
        return index

    @cached_property
    def _node_types(self) -> dict[str, NodeType]:
        return {n.id: n for n in self.node_types}

    def placement(self, placement_id: str) -> AnyPlacement:
        """The placement with this id (``KeyError`` naming it when there is none)."""
        try:
            return self._by_id[placement_id]
        except KeyError:
            raise KeyError(f"flow {self.id!r} has no placement {placement_id!r}") from None

    def has_placement(self, placement_id: str) -> bool:
        return placement_id in self._by_id

    def node_type(self, node_ref: str) -> NodeType | None:
        """The node type this document declares for ``node_ref``, if any."""
        return self._node_types.get(node_ref)

    @property
    def label(self) -> str:
        return self.name or self.id

    @property
    def main_entrypoint(self) -> str:
        return self.entrypoints.get("main") or next(iter(self.entrypoints.values()))

    def phases(self, kind: PhaseKind) -> tuple[Phase, ...]:
        return tuple(p for p in self.placements if isinstance(p, Phase) and p.phase is kind)

    def terminals(self) -> tuple[Terminal, ...]:
        return tuple(p for p in self.placements if isinstance(p, Terminal))

    def settings_at(
        self, placement: AnyPlacement, *, defaults: NodeSettings | None = None
    ) -> NodeSettings:
        """The settings in force at ``placement``, each field from the nearest layer that sets it.

        From farthest to nearest: ``defaults`` (the node implementation's own, when known), the
        node type this flow declares for the placement's node, the placement's own settings.
        """
        settings = defaults or NodeSettings()
        ref = node_ref(placement)
        declared = self.node_type(ref) if ref is not None else None
        if declared is not None:
            settings = settings.overlay(declared.settings)
        return settings.overlay(placement.node_settings())

    def placement_iri(self, placement_id: str) -> str:
        """The absolute IRI of a placement: its id if it is one, else ``<flow id>/node/<id>``."""
        if is_absolute_iri(placement_id):
            return placement_id
        return f"{self.id}/node/{placement_id}"

    def to_data(self) -> dict[str, Any]:
        """The flow as plain JSON data (the native document shape), defaults left out."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["version"] = self.version
        data["placements"] = [
            {"id": p.id, "kind": p.kind, **p.model_dump(mode="json", exclude_defaults=True)}
            for p in self.placements
        ]
        return {k: data[k] for k in _FIELD_ORDER if k in data}


_FIELD_ORDER = tuple(Flow.model_fields)


def node_ref(placement: AnyPlacement) -> str | None:
    """The node a placement runs: a task's or phase's node, or a scatter's body node."""
    if isinstance(placement, Task | Phase):
        return placement.node
    if isinstance(placement, Scatter):
        return placement.body.node
    return None


def is_absolute_iri(text: str) -> bool:
    """True for ``scheme:...`` IRIs (``urn:x``, ``https://...``); False for plain local ids."""
    scheme, sep, rest = text.partition(":")
    return bool(
        sep and rest and scheme[:1].isalpha() and all(c.isalnum() or c in "+-." for c in scheme)
    )
