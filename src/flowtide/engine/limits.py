"""How large a value a run may keep: each top-level state value, a park payload, a signal
payload and each key of a run's input, measured as the JSON text a store keeps.

A value over the limit is refused where it is made, and nothing of it is stored: a node that
makes one fails (its error names the node and the key), a signal or a start with one raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowtide.engine.errors import EngineError
from flowtide.jsonpointer import join
from flowtide.store.jsonvalues import check_json, encode_json

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "ValueTooLargeError", "check_size", "check_sizes"]

DEFAULT_MAX_VALUE_BYTES = 1 << 20
"""1 MiB: ``Engine(max_value_bytes=...)`` sets another limit, None none."""


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


def check_size(value: Any, where: str, limit: int | None) -> None:
    """Raise :class:`~flowtide.store.jsonvalues.NotJSONError` if ``value`` is not JSON, and
    :class:`ValueTooLargeError` if it is over ``limit`` bytes as JSON (one pass for both)."""
    if limit is None:
        check_json(value, where)
        return
    size = len(encode_json(value, where).encode("utf-8"))
    if size > limit:
        raise ValueTooLargeError(where, size, limit)


def check_sizes(values: Mapping[str, Any], where: str, limit: int | None) -> None:
    """:func:`check_size` of each value of ``values`` (top-level state keys), at
    ``where/key``; a key that is not a string is refused, as JSON refuses it."""
    for key, value in values.items():
        if not isinstance(key, str):
            check_json({key: value}, where)  # (raises, naming the key)
        check_size(value, join(where, key), limit)
