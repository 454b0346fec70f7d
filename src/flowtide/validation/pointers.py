"""JSON pointers (RFC 6901) into native flow data."""

from __future__ import annotations

import reprlib

from flowtide.jsonpointer import escape, join

_SHORT = reprlib.Repr()
_SHORT.maxlevel = 2
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 4


__all__ = ["escape", "pointer", "short", "type_name"]


def pointer(*parts: object) -> str:
    """The pointer made of ``parts`` (``pointer("placements", 3, "routes", "ok")``)."""
    return join("", *parts)


def short(value: object) -> str:
    """A short, safe ``repr`` of any value, for messages about input."""
    return _SHORT.repr(value)


def type_name(value: object) -> str:
    """What a JSON value is, in JSON's words (``a list``, ``text``, ``a number``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
