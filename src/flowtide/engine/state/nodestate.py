"""A node's own copy of the run state, made as the node touches it (copy-on-write).

A node may mutate anything it reads from ``ctx.state`` (``ctx.state["items"].append(x)``)
without changing the run's state: the first time it reads a top-level value that is a container,
that value is deep-copied and the copy is what the node gets from then on. Values it never reads
stay shared with the run's state (the run never changes a value in place: a step replaces it),
so a step costs what it touches, not what the state holds.

Every way a dict hands out a value copies it first: ``state[key]``, ``get``, ``pop``,
``popitem``, ``setdefault``, ``values()``, ``items()``, ``copy()``, ``|``, ``dict(state)``,
``{**state}``. Writes and deletes are a dict's own. What the node changed is found by comparing
with the values it started from: a value it never read is the same object, so only the keys it
read or wrote are compared (:meth:`NodeState.changes`). (C code that reads a dict's storage
directly, ``PyDict_Next``, sees the shared values: ``dict(state)`` gives it the node's own.)
"""

from __future__ import annotations

import copy
import threading
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any

__all__ = ["NodeState", "copy_value"]

_IMMUTABLE: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
_MISSING: Any = object()
_SWAP = threading.Lock()
"""Held while a copy replaces a shared value: two threads of one node reading the same key at
once both end up with the one copy the state keeps."""


def copy_value(value: Any) -> Any:
    """A copy of ``value`` that may be mutated: containers deep-copied, immutable values as
    they are (an object that cannot be copied, a generator say, is shared)."""
    if type(value) in _IMMUTABLE:
        return value
    try:
        return copy.deepcopy(value)
    except TypeError:
        return value


class NodeState(dict[str, Any]):
    """The state a node sees: a dict whose container values are copied when first read.

    ``base``: the run state the node starts from, a mapping nobody changes while the node runs
    (its values are shared until read; a snapshot of it is kept to compare with).
    """

    __slots__ = ("_base",)

    def __init__(self, base: Mapping[str, Any]) -> None:
        self._base: dict[str, Any] = dict(base)
        dict.__init__(self, self._base)

    def _own(self, key: str, value: Any) -> Any:
        """``value`` (found at ``key``) as the node may mutate it: a copy, kept, if it is still
        the run's shared container."""
        if type(value) in _IMMUTABLE or value is not self._base.get(key, _MISSING):
            return value
        copied = copy_value(value)
        with _SWAP:
            current = dict.get(self, key, _MISSING)
            if current is value:
                dict.__setitem__(self, key, copied)
                return copied
        if current is _MISSING:
            raise KeyError(key)  # (deleted by another thread meanwhile)
        return current  # (copied, or written, by another thread meanwhile)

    # -- reads: each copies a shared container first ------------

    def __getitem__(self, key: str) -> Any:
        return self._own(key, dict.__getitem__(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        value = dict.get(self, key, _MISSING)
        return default if value is _MISSING else self._own(key, value)

    def pop(self, key: str, *default: Any) -> Any:
        if not dict.__contains__(self, key):
            return dict.pop(self, key, *default)  # (the default, or KeyError)
        value = self[key]
        dict.__delitem__(self, key)
        return value

    def popitem(self) -> tuple[str, Any]:
        key, value = dict.popitem(self)
        if type(value) not in _IMMUTABLE and value is self._base.get(key, _MISSING):
            value = copy_value(value)
        return key, value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return _Values(self)

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return _Items(self)

    def __iter__(self) -> Iterator[str]:
        # (Defined so that dict(state), {**state} and dict.update take each value through
        # __getitem__ instead of reading the dict's storage.)
        return dict.__iter__(self)

    def copy(self) -> dict[str, Any]:
        """A plain dict of the node's values (as ``dict.copy``: the same objects the node sees)."""
        return {key: self[key] for key in self}

    def as_stored(self) -> dict[str, Any]:
        """A plain dict of the values as they stand, none copied: a value the node never read
        is still the one it started from (shared: to be read, or copied before it is changed)."""
        return dict(dict.items(self))

    def __or__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**self.copy(), **other}

    def __ror__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**other, **self.copy()}

    def __ior__(self, other: Any) -> NodeState:  # type: ignore[override]
        self.update(other)
        return self

    def __copy__(self) -> dict[str, Any]:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        # (A deep copy shares nothing: the values as stored are copied, none needs owning.)
        return copy.deepcopy(dict(dict.items(self)), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (for a node in a process) as the plain dict it stands for.
        return (dict, (dict(dict.items(self)),))

    @classmethod
    def fromkeys(cls, keys: Any, value: Any = None) -> dict[str, Any]:  # type: ignore[override]
        return dict.fromkeys(keys, value)

    # -- what the node changed ------------

    def changes(self) -> tuple[dict[str, Any], list[str]]:
        """The top-level keys the node set to another value than it started with (added
        ones too), and the keys it deleted. A value it never read is the one it started with:
        only the keys it read or wrote are compared."""
        base = self._base
        changed: dict[str, Any] = {}
        added = 0
        for key, value in dict.items(self):
            old = base.get(key, _MISSING)
            if old is value:
                continue
            if old is _MISSING:
                added += 1
                changed[key] = value
            elif type(old) is not type(value) or old != value:
                changed[key] = value
        kept = len(self) - added
        deleted = [k for k in base if not dict.__contains__(self, k)] if kept < len(base) else []
        return changed, deleted


class _Values(ValuesView[Any]):
    """``state.values()``: each value as ``state[key]`` gives it."""

    _mapping: NodeState

    def __reversed__(self) -> Iterator[Any]:
        return (self._mapping[key] for key in reversed(self._mapping))


class _Items(ItemsView[str, Any]):
    """``state.items()``: each value as ``state[key]`` gives it."""

    _mapping: NodeState

    def __reversed__(self) -> Iterator[tuple[str, Any]]:
        return ((key, self._mapping[key]) for key in reversed(self._mapping))
