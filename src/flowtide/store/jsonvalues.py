"""JSON values: the one encoding every store gives run state and the data of its records.

A value is JSON when it is None, a bool, an int, a finite float, a str, a list or a tuple of
JSON values, or a dict whose keys are strings and whose values are JSON. A tuple is written as a
list, so it comes back as a list, as from any database. Anything else is refused with
:class:`NotJSONError`, which names where the value is as a JSON pointer: a set, bytes, a
datetime (keep an ISO 8601 string instead), an object, NaN or an infinity, a key that is not a
string (JSON would turn ``1`` into ``"1"`` and hand back another dict), a value that contains
itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import date, time, timedelta
from typing import Any

from flowtide.errors import FlowtideError
from flowtide.jsonpointer import join

__all__ = ["NotJSONError", "check_json", "decode_json", "encode_json"]


class NotJSONError(FlowtideError, TypeError):
    """A value to keep is not JSON: the caller's mistake, not the store's (retrying will not
    help). ``pointer`` says where the value is, ``reason`` what is wrong with it."""

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        super().__init__(f"{pointer}: {reason}")


def check_json(value: Any, where: str) -> None:
    """Raise :class:`NotJSONError` unless ``value`` is JSON; ``where`` names the value (the
    start of the pointer in the error: ``check_json(update, "state")``)."""
    encode_json(value, where)


def encode_json(value: Any, where: str) -> str:
    """``value`` as JSON text (checked as :func:`check_json` does).

    The standard library's encoder writes it; the text must read back as the same value. When it
    does not (a key that is not a string was turned into one, or a tuple came back a list), or
    when the encoder refuses it, the value is walked to tell which: a tuple is fine, anything
    else is refused with the pointer to it.
    """
    if value is None:
        return "null"
    if type(value) is dict and not value:
        return "{}"  # (most records' data: no encoder needed)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        _check(value, [where], set())  # says where, for what the walk can tell
        raise NotJSONError(join(where), str(exc)) from exc
    if json.loads(text) != value:
        _check(value, [where], set())
    return text


def decode_json(text: str) -> Any:
    """The value :func:`encode_json` gave ``text`` for, as new objects."""
    return json.loads(text)


def _check(value: Any, path: list[Any], open_containers: set[int]) -> None:
    """Check ``value`` at ``path`` (its pointer's tokens); ``open_containers``: the ids of the
    lists and dicts that hold it, to tell a value that contains itself."""
    if value is None or isinstance(value, str | bool | int):
        return  # (an enum member of these kinds is written as its value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSONError(join(*path), f"{value} is not JSON")
        return
    if isinstance(value, dict | list | tuple):
        if id(value) in open_containers:
            raise NotJSONError(join(*path), "a value that contains itself is not JSON")
        open_containers.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotJSONError(
                        join(*path), f"the key {key!r} is not JSON: keys must be strings"
                    )
                path.append(key)
                _check(item, path, open_containers)
                path.pop()
        else:
            for index, item in enumerate(value):
                path.append(index)
                _check(item, path, open_containers)
                path.pop()
        open_containers.discard(id(value))
        return
    raise NotJSONError(join(*path), _why_not(value))


def _why_not(value: Any) -> str:
    """Why ``value`` (not a JSON kind) is refused: ``a set is not JSON``."""
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(value, date | time | timedelta):
        return f"{article} {name} is not JSON (keep an ISO 8601 string)"
    return f"{article} {name} is not JSON"


def encode_state(
    state: Mapping[str, Any], encode: Callable[[Any, str], str] = encode_json
) -> dict[str, str]:
    """A run state's top-level keys and their values as JSON text (``encode``: how a value is
    written, :func:`encode_json` by default), each named ``state/<key>`` in an error; a key
    that is not a string is refused."""
    encoded = {}
    for key, value in state.items():
        if not isinstance(key, str):
            encode_json({key: value}, "state")  # (raises, naming the key)
        encoded[key] = encode(value, join("state", key))
    return encoded
