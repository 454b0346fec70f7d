"""Pydantic's validation errors, told as plain sentences at the right JSON pointer.

Pydantic locates an error by a path (``('task', 'settings', 'timeout_anchor')``) and words it for
programmers (``Input should be 'park', 'instance' or 'node'``). Flowtide drops the discriminator
tag from the path and says what is wrong in the words of the document (``unknown timeout anchor
'nod' (anchors: park, instance, node)``).
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from flowtide.errors import Problem
from flowtide.model.placements import KIND_NAMES, PLACEMENT_KINDS
from flowtide.model.settings import NodeSettings
from flowtide.validation.pointers import pointer, short, type_name

SETTING_NAMES: tuple[str, ...] = tuple(NodeSettings.model_fields)

#: Field name -> (what one value is called, what the choices are called).
_CHOICE_NOUNS: dict[str, tuple[str, str]] = {
    "timeout_anchor": ("timeout anchor", "anchors"),
    "anchor": ("timeout anchor", "anchors"),
    "mode": ("join mode", "modes"),
    "strategy": ("gather strategy", "strategies"),
    "backoff": ("backoff", "backoffs"),
    "phase": ("phase", "phases"),
    "on_failure": ("failure policy", "policies"),
}

_WHOLE_NUMBER = {"int_type", "int_parsing", "int_from_float", "int_parsing_size"}
_NUMBER = {"float_type", "float_parsing", "finite_number"}
_MAPPING = {"dict_type", "model_type", "model_attributes_type", "dataclass_type"}
_LIST = {"tuple_type", "list_type", "iterable_type", "set_type", "frozen_set_type"}
_BOOLEAN = {"bool_type", "bool_parsing"}
_DATETIME_PREFIXES = ("datetime_", "date_", "time_", "timezone_")


def translate(
    exc: ValidationError,
    prefix: Sequence[object] = (),
    *,
    root: type[BaseModel] | None = None,
    placement: str | None = None,
    drop_tag: bool = False,
) -> list[Problem]:
    """One problem per pydantic error, located under ``prefix``.

    ``root`` is the model validated (to list the fields an unknown field could have been);
    ``drop_tag`` removes a leading placement-kind tag from each error's location.
    """
    problems: list[Problem] = []
    for err in exc.errors():
        loc = list(err["loc"])
        if drop_tag and loc and loc[0] in KIND_NAMES:
            loc = loc[1:]
            model: type[BaseModel] | None = _kind_model(str(err["loc"][0]))
        else:
            model = root
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
        problems.append(
            Problem(
                sentence(err, loc, model),
                pointer=pointer(*prefix, *loc),
                placement=placement,
            )
        )
    return problems


def sentence(err: ErrorDetails, loc: Sequence[object], model: type[BaseModel] | None) -> str:
    """The error in one plain sentence."""
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    value = err.get("input")
    field = loc[-1] if loc else None
    parent = loc[-2] if len(loc) >= 2 else None
    name = _name(loc)
    if err["loc"] and err["loc"][-1] == "[key]":
        return f"the key {short(field)} of '{parent}' must be text"
    if kind == "missing":
        return f"{name} is required"
    if kind == "extra_forbidden":
        return _unknown_field(field, loc, model)
    if kind in ("enum", "literal_error"):
        return _unknown_choice(field, value, str(ctx.get("expected", "")))
    if kind in ("value_error", "assertion_error"):
        error = ctx.get("error")
        return str(error) if error is not None else _strip(err["msg"])
    if kind == "string_too_short":
        if field == "outcome":
            return "a terminal's outcome must not be empty (use 'completed', 'failed' or a name)"
        return f"{name} must not be empty"
    if kind == "too_short":
        return _too_short(loc, ctx)
    if kind == "string_type" and isinstance(field, int) and len(loc) >= 3 and loc[-3] == "routes":
        return f"target {field} of route {parent!r} must be a placement id, not {type_name(value)}"
    if kind == "string_type":
        return f"{name} must be text, not {type_name(value)}"
    if kind in _WHOLE_NUMBER:
        return f"{name} must be a whole number, not {short(value)}"
    if kind in _NUMBER:
        return f"{name} must be a number, not {short(value)}"
    if kind in _BOOLEAN:
        return f"{name} must be true or false, not {short(value)}"
    if kind in _MAPPING:
        return f"{name} must be a mapping, not {type_name(value)}"
    if kind in _LIST:
        if parent == "routes" and isinstance(field, str):
            return (
                f"route {field!r} must name a placement id or a list of placement ids, "
                f"not {type_name(value)}"
            )
        return f"{name} must be a list, not {type_name(value)}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return _bound(name, kind, ctx, value)
    if kind.startswith(_DATETIME_PREFIXES):
        return (
            f"{name} must be an instant with a time zone "
            f"(such as '2026-01-01T00:00:00Z'), not {short(value)}"
        )
    text = err["msg"]
    return f"{name}: {text[:1].lower()}{text[1:]}"


def _name(loc: Sequence[object]) -> str:
    if not loc:
        return "the value"
    last = loc[-1]
    if isinstance(last, int):
        if len(loc) >= 2:
            return f"item {last} of {loc[-2]!r}"
        return f"item {last}"
    return repr(str(last))


def _strip(msg: str) -> str:
    for head in ("Value error, ", "Assertion failed, "):
        if msg.startswith(head):
            return msg[len(head) :]
    return msg


def _unknown_field(field: object, loc: Sequence[object], model: type[BaseModel] | None) -> str:
    if len(loc) >= 2 and loc[-2] == "settings":
        return f"unknown setting {short(field)} (settings: {', '.join(SETTING_NAMES)})"
    owner = _model_at(model, loc[:-1]) if model is not None else None
    if owner is None:
        return f"unknown field {short(field)}"
    fields = ", ".join(owner.model_fields)
    return f"unknown field {short(field)} (fields: {fields})"


def _unknown_choice(field: object, value: object, expected: str) -> str:
    choices = ", ".join(re.findall(r"'([^']*)'", expected)) or expected
    noun, plural = _CHOICE_NOUNS.get(str(field), (f"value for {str(field)!r}", "choices"))
    return f"unknown {noun} {short(value)} ({plural}: {choices})"


def _too_short(loc: Sequence[object], ctx: dict[str, Any]) -> str:
    field = loc[-1] if loc else None
    if len(loc) == 1 and field == "placements":
        return "a flow needs at least one placement"
    if len(loc) == 1 and field == "entrypoints":
        return "a flow needs at least one entrypoint (such as main: <placement id>)"
    if len(loc) >= 2 and loc[-2] == "routes":
        return f"route {str(field)!r} names no placement"
    if field == "outputs":
        return "a node type must declare at least one output"
    count = ctx.get("min_length", 1)
    return f"{_name(loc)} must have at least {count} item{'s' if count != 1 else ''}"


def _bound(name: str, kind: str, ctx: dict[str, Any], value: object) -> str:
    words = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("greater than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
    }
    phrase, key = words[kind]
    return f"{name} must be {phrase} {ctx.get(key)}, not {short(value)}"


def _kind_model(tag: str) -> type[BaseModel] | None:
    for cls in PLACEMENT_KINDS:
        if cls.model_fields["kind"].default == tag:
            return cls
    return None


def _model_at(root: type[BaseModel], loc: Sequence[object]) -> type[BaseModel] | None:
    """The model found by following ``loc`` from ``root`` (through optionals and lists)."""
    current: Any = root
    for part in loc:
        model = _as_model(current)
        if model is not None:
            if not isinstance(part, str) or part not in model.model_fields:
                return None
            current = model.model_fields[part].annotation
        else:
            current = _item_type(current)
            if current is None:
                return None
    return _as_model(current)


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            return _unwrap(inner[0])
    return tp


def _as_model(tp: Any) -> type[BaseModel] | None:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    return None


def _item_type(tp: Any) -> Any:
    tp = _unwrap(tp)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in (tuple, list) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None
