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
from collections.abc import Callable, Iterable, Mapping
from datetime import date, time, timedelta
from itertools import chain, compress
from typing import Any

from flowtide.errors import FlowtideError
from flowtide.jsonpointer import join

__all__ = ["EncodedState", "NotJSONError", "check_json", "decode_json", "encode_json"]


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

    The standard library's encoder writes it, refusing what is not JSON but for one thing: it
    turns a key that is a number, a bool or None into a string (and a value that reads back as
    another). So unless every container is a plain dict or list and every key a string (looked
    at in bulk), or when the encoder refuses the value, the value is walked to tell: a tuple or a
    subclass of a JSON kind is fine, anything else is refused with the pointer to it.
    """
    if value is None:
        return "null"
    kind = type(value)
    if kind is dict and not value:
        return "{}"  # (most records' data: no encoder needed)
    if kind is int:
        return int.__repr__(value)  # (as the encoder writes it)
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        _check(value, [where], set())  # says where, for what the walk can tell
        raise NotJSONError(join(where), str(exc)) from exc
    if kind not in _SCALARS and not _plain(value):
        _check(value, [where], set())
    return text


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
"""(Made once: ``json.dumps`` with options makes an encoder per call.)"""
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_PLAIN: frozenset[type] = _SCALARS | {dict, list}
_SCALARS_OR_LIST: frozenset[type] = _SCALARS | {list}
_TEXT: frozenset[type] = frozenset({str})
_is_dict = frozenset({dict}).__contains__
_is_list = frozenset({list}).__contains__


def _plain(value: Any) -> bool:
    """True if ``value`` holds only plain dicts, lists and scalars, and every key is a str;
    False when it cannot tell so (then :func:`_check` walks it). Looked at a level at a time,
    each level's keys and values in bulk, without a Python step per item. (``value`` is one the
    encoder took: it contains no container twice on one path.)"""
    if type(value) is dict and _TEXT.issuperset(map(type, value)):
        # Most records' data: scalars, and lists of scalars (a move's targets), told without
        # building the levels.
        kinds = set(map(type, value.values()))
        if _SCALARS.issuperset(kinds):
            return True
        if _SCALARS_OR_LIST.issuperset(kinds):
            inner = compress(value.values(), map(_is_list, map(type, value.values())))
            if _SCALARS.issuperset(map(type, chain.from_iterable(inner))):
                return True
    dicts: list[dict[Any, Any]] = [value] if type(value) is dict else []
    lists: list[list[Any]] = [value] if type(value) is list else []
    if not dicts and not lists:
        return False
    while dicts or lists:
        if dicts and not _TEXT.issuperset(map(type, chain.from_iterable(dicts))):
            return False
        values: Iterable[Any] = chain.from_iterable(map(dict.values, dicts))
        children = [*values, *chain.from_iterable(lists)]
        kinds = set(map(type, children))
        if not _PLAIN.issuperset(kinds):
            return False
        dicts = _only(children, _is_dict) if dict in kinds else []
        lists = _only(children, _is_list) if list in kinds else []
    return True


def _only(items: list[Any], kind: Callable[[type], bool]) -> list[Any]:
    """The items whose type is ``kind``, picked without a Python step per item."""
    return list(compress(items, map(kind, map(type, items))))


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


class EncodedState(dict[str, Any]):
    """Top-level state values (key -> value) that carry the JSON text of some of them, as
    :func:`encode_json` wrote it when the engine checked them (``json``: key -> text). A store
    writes that text as given (:func:`encode_state`): a value a step changed is encoded once."""

    __slots__ = ("json",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(values or {})
        self.json: dict[str, str] = {}


def encode_state(
    state: Mapping[str, Any], encode: Callable[[Any, str], str] = encode_json
) -> dict[str, str]:
    """A run state's top-level keys and their values as JSON text (``encode``: how a value is
    written, :func:`encode_json` by default; the text an :class:`EncodedState` carries is taken
    as it is), each named ``state/<key>`` in an error; a key that is not a string is refused."""
    known = state.json if isinstance(state, EncodedState) else {}
    encoded = {}
    for key, value in state.items():
        text = known.get(key)
        if text is None:
            if not isinstance(key, str):
                encode_json({key: value}, "state")  # (raises, naming the key)
            text = encode(value, join("state", key))
        encoded[key] = text
    return encoded
