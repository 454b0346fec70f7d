"""Node types: what a node implementation declares about itself.

A :class:`NodeType` is the contract of a node implementation (its IRI, the outputs it may return,
its default settings, optional JSON Schemas per output) without the code. Documents may declare
node types so that a flow can be checked without importing anything; the Python decorator builds
one from a function (see :mod:`flowtide.authoring`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flowtide.model.placements import RESERVED_OUTPUTS
from flowtide.model.scalars import Flag
from flowtide.model.settings import NodeSettings


class NodeType(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(
        min_length=1,
        description="The id the node is registered under: an IRI, or 'module:qualname'.",
    )
    outputs: tuple[str, ...] = Field(
        min_length=1,
        description="Outputs the node may return.",
        json_schema_extra={"uniqueItems": True, "items": {"type": "string", "minLength": 1}},
    )
    name: str | None = None
    description: str | None = None
    settings: NodeSettings = Field(default_factory=NodeSettings, description="Defaults.")
    output_schemas: dict[str, dict[str, Any]] | None = Field(
        default=None, description="A JSON Schema per output, for the state the output carries."
    )
    parks: Flag = Field(
        default=False,
        description="The node may park (wait on the outside world) instead of returning an output.",
    )
    ref: str | None = Field(
        default=None,
        description="Where the implementation lives, 'module:attribute' (for reading: an "
        "engine runs only registered code, never a module a document names).",
    )

    @field_validator("outputs")
    @classmethod
    def _outputs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        seen: set[str] = set()
        for out in v:
            if not out:
                raise ValueError("an output name must not be empty")
            if out in seen:
                raise ValueError(f"output {out!r} is declared twice")
            seen.add(out)
        return v

    @model_validator(mode="after")
    def _schemas_for_declared(self) -> NodeType:
        if self.output_schemas:
            unknown = sorted(set(self.output_schemas) - set(self.outputs) - RESERVED_OUTPUTS)
            if unknown:
                raise ValueError(f"output_schemas names undeclared output(s): {', '.join(unknown)}")
        return self
