"""How large a value a run may keep: each top-level state value, a park payload, a signal
payload and each key of a run's input, measured as the JSON text a store keeps, and how deep it
may nest (:data:`MAX_NESTING` levels of lists and objects, whatever the engine's size limit).

A value over a limit is refused where it is made, and nothing of it is stored: a node that
makes one fails (its error names the node and the key), a signal or a start with one raises.
So is a string that is not Unicode text (a lone surrogate, which no store can write as UTF-8).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from flowtide.engine.errors import EngineError
from flowtide.jsonpointer import join
from flowtide.store.jsonvalues import EncodedState, NotJSONError, check_json, encode_json

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_NESTING",
    "InvalidKeyError",
    "ValueTooDeepError",
    "ValueTooLargeError",
    "check_key",
    "check_keys",
    "check_nesting",
    "check_signal",
    "check_size",
    "check_sizes",
    "check_start",
    "checked",
]

DEFAULT_MAX_VALUE_BYTES = 1 << 20
"""1 MiB: ``Engine(max_value_bytes=...)`` sets another limit, None none."""

MAX_NESTING = 100
"""How many levels of lists and objects a value may nest (``[[1]]`` is two): deep enough for
any data a run keeps, and far from the depth at which Python's JSON coders give up (about
1,000), so that a stored value can always be read back."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


class ValueTooLargeError(EngineError, ValueError):
    """A value is larger, as JSON, than the engine allows (``Engine(max_value_bytes=...)``)."""

    def __init__(self, where: str, size: int, limit: int) -> None:
        self.where = where
        self.size = size
        self.limit = limit
        super().__init__(
            f"{where} is {size:,} bytes as JSON, over the limit of {limit:,} "
            "(Engine(max_value_bytes=...)): keep large data elsewhere and a reference to it here"
        )

    def details(self) -> dict[str, Any]:
        return {"where": self.where, "size": self.size, "limit": self.limit}


class ValueTooDeepError(ValueTooLargeError):
    """A value nests lists and objects deeper than :data:`MAX_NESTING` levels (refused wherever a
    value too large is)."""

    def __init__(self, where: str, depth: int | None, limit: int = MAX_NESTING) -> None:
        self.where = where
        self.depth = depth
        self.size = depth or 0
        self.limit = limit
        levels = f"{depth} levels deep" if depth is not None else "more deeply than JSON is read"
        EngineError.__init__(
            self,
            f"{where} nests lists and objects {levels}, over the limit of {limit} levels",
        )

    def details(self) -> dict[str, Any]:
        return {"where": self.where, "depth": self.depth, "limit": self.limit}


def check_size(value: Any, where: str, limit: int | None) -> str:
    """``value`` as JSON text (:func:`~flowtide.store.jsonvalues.encode_json`), once checked:
    raise :class:`~flowtide.store.jsonvalues.NotJSONError` if ``value`` is not JSON (or holds
    a string that is not Unicode text), :class:`ValueTooDeepError` if it nests deeper than
    :data:`MAX_NESTING`, and :class:`ValueTooLargeError` if it is over ``limit`` bytes as JSON
    (``None``: no size limit)."""
    if value is None or isinstance(value, bool | int | float):
        return encode_json(value, where)
    try:
        text = encode_json(value, where)
    except RecursionError:
        raise ValueTooDeepError(where, None) from None
    check_nesting(text, where)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        shown = ascii(exc.object[exc.start : exc.end])
        raise NotJSONError(
            _not_text(value, where),
            f"a string holds {shown}, a lone surrogate, which is not Unicode text",
        ) from None
    if limit is not None and size > limit:
        raise ValueTooLargeError(where, size, limit)
    return text


def _not_text(value: Any, where: str) -> str:
    """The pointer to the first string (or key) in ``value`` that is not Unicode text."""
    pending: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while pending:
        item, path = pending.pop()
        if isinstance(item, str) and not _is_text(item):
            return join(where, *path)
        if isinstance(item, dict):
            for key, inner in reversed(item.items()):
                if not _is_text(key):
                    return join(where, *path)
                pending.append((inner, (*path, key)))
        elif isinstance(item, list | tuple):
            pending.extend((inner, (*path, i)) for i, inner in reversed(list(enumerate(item))))
    return join(where)


def _is_text(text: Any) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_nesting(text: str, where: str, limit: int = MAX_NESTING) -> None:
    """Raise :class:`ValueTooDeepError` if the JSON ``text`` nests lists and objects deeper than
    ``limit`` levels. Strings are set aside first (their brackets are text); a value with no more
    brackets than the limit is not scanned."""
    if text.count("[") + text.count("{") <= limit:
        return
    bare = _STRING.sub('""', text)
    if bare.count("[") + bare.count("{") <= limit:
        return
    steps = (1 if found.group() in "[{" else -1 for found in _BRACKET.finditer(bare))
    depth = max(accumulate(steps))
    if depth > limit:
        raise ValueTooDeepError(where, depth, limit)


def check_sizes(values: Mapping[str, Any], where: str, limit: int | None) -> dict[str, str]:
    """:func:`check_size` of each value of ``values`` (top-level state keys), at
    ``where/key``; a key that is not a string is refused, as JSON refuses it. Returns each
    value's JSON text, by key."""
    texts = {}
    for key, value in values.items():
        if not isinstance(key, str):
            check_json({key: value}, where)  # (raises, naming the key)
        texts[key] = check_size(value, join(where, key), limit)
    return texts


def checked(values: Mapping[str, Any], where: str, limit: int | None) -> EncodedState:
    """``values`` (top-level state keys), checked as :func:`check_sizes` does, carrying the
    JSON text of each: what a store writes for them."""
    out = EncodedState(values)
    if values:
        out.json.update(check_sizes(values, where, limit))
    return out


# -- keys and ids ------------

MAX_KEY_BYTES = 1024
"""The longest a park's correlation key, a signal's idempotency key or a top-level state key may
be, in bytes of UTF-8: a database indexes them, and an index entry has a size limit."""
MAX_ID_BYTES = 255
"""The longest a run id or a flow id may be, in bytes of UTF-8 (the ids of a run's tokens and
parks are made from it)."""


class InvalidKeyError(EngineError, ValueError):
    """A key or an id no store can keep the same: longer than its limit, with a NUL character,
    or not valid Unicode text. Refused by the engine before anything is stored, on every store:
    a node that makes one fails its attempt; a start or a signal with one raises."""

    def __init__(self, what: str, value: str, reason: str) -> None:
        self.what = what
        self.value = value
        self.reason = reason
        super().__init__(f"{what} {shown(value)} {reason}")

    def details(self) -> dict[str, Any]:
        return {"what": self.what, "value": shown(self.value), "reason": self.reason}


def shown(value: str, most: int = 40) -> str:
    """``value`` as an error names it: its repr (control characters escaped), cut to ``most``
    characters with how long it was."""
    if len(value) <= most:
        return repr(value)
    return f"{value[:most]!r}... ({len(value):,} characters)"


def check_key(value: Any, what: str, limit: int = MAX_KEY_BYTES) -> None:
    """Raise :class:`InvalidKeyError` unless ``value`` is text every store keeps as it is: at
    most ``limit`` bytes of UTF-8, no NUL character (PostgreSQL's text refuses it), valid
    Unicode (no lone surrogate). ``what`` names it in the error (``park key of node 'ask'``)."""
    if not isinstance(value, str):
        raise InvalidKeyError(what, repr(value), f"is a {type(value).__name__}, not text")
    if "\x00" in value:
        raise InvalidKeyError(what, value, "has a NUL character, which no store keeps")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        reason = f"is not valid Unicode text (character {exc.start}: a lone surrogate)"
        raise InvalidKeyError(what, value, reason) from None
    if size > limit:
        raise InvalidKeyError(what, value, f"is {size:,} bytes long, over the limit of {limit:,}")


def check_keys(values: Mapping[str, Any], where: str) -> None:
    """:func:`check_key` of each top-level key of ``values`` (a state, an update, a payload)."""
    for key in values:
        if isinstance(key, str):  # (a key that is not text is refused as not JSON)
            check_key(key, f"{where} key")


def check_signal(
    key: str | None, idempotency_key: str | None, payload: Mapping[str, Any] | None
) -> None:
    """:func:`check_key` of a signal's correlation key, idempotency key and payload keys."""
    for text, what in ((key, "key"), (idempotency_key, "idempotency key")):
        if text is not None:
            check_key(text, what)
    if payload is not None:
        check_keys(payload, "payload")


def check_start(input: Mapping[str, Any], run_id: str | None, limit: int | None) -> dict[str, str]:
    """A new run's input (:func:`check_sizes`, :func:`check_keys`) and its id, if given;
    returns each input value's JSON text, by key."""
    texts = check_sizes(input, "input", limit)
    check_keys(input, "input")
    if run_id is not None:
        check_key(run_id, "run id", MAX_ID_BYTES)
    return texts
