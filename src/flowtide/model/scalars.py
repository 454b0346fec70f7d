"""Numbers and flags as documents write them, and the JSON Schema rules the models add.

A document's numbers are JSON numbers and its flags JSON booleans: ``concurrency: "4"`` and
``interrupting: 1`` are refused (Python would read ``"4"`` as 4 and ``1`` as true), so that a
document that loads is one the flow schema accepts. A whole number may be written ``4.0``,
which JSON Schema counts as an integer too.

The rules below say in JSON Schema what a model's validators check across its fields (exactly
one of two fields, two fields not together), so that an editor can tell them as the loader does.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, Strict, WithJsonSchema


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[
    int,
    Strict(),
    BeforeValidator(_whole),
    Field(ge=1),
    WithJsonSchema({"type": "integer", "minimum": 1}),
]
"""A whole number, 1 or more: a JSON integer (``4``, or ``4.0``), never text or a boolean."""

Number = Annotated[float, Strict()]
"""A JSON number (``2.5``, ``2``), never text or a boolean."""

Flag = Annotated[bool, Strict()]
"""``true`` or ``false``, never ``1``, ``"yes"`` or ``"true"``."""


def _set(name: str) -> dict[str, Any]:
    """``name`` is there and not null (a null field means the same as a missing one)."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def exactly_one(first: str, second: str) -> dict[str, Any]:
    """A JSON Schema rule: exactly one of two fields is set."""
    return {"oneOf": [_set(first), _set(second)]}


def not_both(first: str, second: str) -> dict[str, Any]:
    """A JSON Schema rule: the two fields are not both set."""
    return {"not": {"allOf": [_set(first), _set(second)]}}


def when(
    field: str, value: str, then: dict[str, Any], otherwise: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A JSON Schema rule: ``then`` holds when ``field`` is ``value``, else ``otherwise``."""
    rule: dict[str, Any] = {
        "if": {"required": [field], "properties": {field: {"const": value}}},
        "then": then,
    }
    if otherwise is not None:
        rule["else"] = otherwise
    return rule


def add_rules(schema: dict[str, Any], *rules: dict[str, Any]) -> None:
    """Add ``rules`` to a model's JSON Schema, after any it has."""
    if rules:
        schema["allOf"] = [*schema.get("allOf", ()), *rules]
