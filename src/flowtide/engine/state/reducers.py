"""Committing a node's state changes into the run state, through the flow's reducers.

A node works on its own copy of the run state. When it returns, its *update* is every top-level
key whose value differs from the value it started with (plus ``Output.update``), and each key is
merged into the run state as the flow declares in ``flow.reducers``:

* ``last`` (default): the node's value replaces the current one (the last commit wins);
* ``append``: the value is appended to the current list - when the node changed a list in
  place, the items it added (the new tail) are appended;
* ``extend``: the current list is extended by the value (a list), or by the added tail;
* ``merge``: the current mapping is updated with the node's changed entries;
* ``sum``: the node's increment (new - old; or the value given in ``Output.update``) is added;
* the id of a registered reducer (``@flowtide.reducer``): ``function(current, value)`` returns
  the new value (``current`` is None when the key has no value yet).

So parallel branches that append to the same list both keep their items, while for a ``last``
key the branch that commits last wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowtide.authoring.functions import reducers
from flowtide.engine.state.limits import checked
from flowtide.engine.state.nodestate import NodeState, copy_value
from flowtide.errors import NodeResolutionError
from flowtide.model.flow import BUILTIN_REDUCERS
from flowtide.store.jsonvalues import EncodedState

_IMMUTABLE: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
_MISSING = object()
BUILTIN = BUILTIN_REDUCERS


def copy_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy that may be mutated: containers are deep-copied, immutable values shared (a
    node's own copy is made as it reads: :class:`~flowtide.engine.state.nodestate.NodeState`)."""
    return {k: copy_value(v) for k, v in state.items()}


def stored_form(value: Any) -> Any:
    """``value`` as a store gives it back: tuples as lists, at any depth (a store keeps JSON,
    so a run's result is the same whether or not the run was rebuilt from the store). Only the
    containers on the way to a tuple are copied; ``value`` is returned as it is without one."""
    t = type(value)
    if t in _IMMUTABLE:
        return value
    if isinstance(value, tuple):
        return [stored_form(v) for v in value]
    if isinstance(value, list):
        items = [stored_form(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        entries = {k: stored_form(v) for k, v in value.items()}
        return entries if any(entries[k] is not v for k, v in value.items()) else value
    return value


class StateMerger:
    """Applies node updates to a run state according to ``reducers``."""

    def __init__(
        self,
        reducers: Mapping[str, str],
        functions: Mapping[str, Callable[[Any, Any], Any]] | None = None,
    ) -> None:
        self._reducers = dict(reducers)
        self._functions = dict(functions or {})
        """Reducer id -> its function, as bound by an executing engine (see
        :mod:`flowtide.engine.flows.code`)."""

    def changes(
        self, base: Mapping[str, Any], new: Mapping[str, Any], limit: int | None
    ) -> tuple[EncodedState, list[str]]:
        """Top-level keys ``new`` sets differently from ``base``, and keys it deleted. Each
        changed value is checked (JSON, at most ``limit`` bytes as JSON: see
        :func:`~flowtide.engine.state.limits.check_size`) and its JSON text kept with it, for the
        store. A :class:`~flowtide.engine.state.nodestate.NodeState` (a node's state) compares only
        the keys the node touched, with the values it started from."""
        if isinstance(new, NodeState):
            found, deleted = new.changes()
        else:  # (a process node's state, sent back whole)
            found = {}
            for k, v in new.items():
                old = base.get(k, _MISSING)
                if old is v:
                    continue
                if old is _MISSING or type(old) is not type(v) or old != v:
                    found[k] = v
            deleted = [k for k in base if k not in new]
        return checked(found, "state", limit), deleted

    def apply(
        self,
        state: dict[str, Any],
        base: Mapping[str, Any],
        changed: Mapping[str, Any],
        deleted: list[str],
        explicit: Mapping[str, Any],
    ) -> tuple[EncodedState, list[str]]:
        """Merge into ``state`` (in place); returns the keys written (with the JSON text of
        those written as found, when ``changed`` carries it) and the keys deleted.

        ``changed`` are values found by comparing the node's copy with ``base``; ``explicit`` are
        values from ``Output.update`` (taken as given: the item to append, the increment, ...).
        """
        written: dict[str, Any] = {}
        for k, v in changed.items():
            if k in explicit:
                continue
            written[k] = self._merge(k, state.get(k, _MISSING), base.get(k, _MISSING), v, False)
        for k, v in explicit.items():
            written[k] = self._merge(k, state.get(k, _MISSING), base.get(k, _MISSING), v, True)
        # What the run keeps is what the store keeps (a tuple is a list there).
        kept = EncodedState({k: stored_form(v) for k, v in written.items()})
        for k, v in kept.items():
            # A value written as it was found goes to the store as the text checked then.
            found = explicit if k in explicit else changed
            if isinstance(found, EncodedState) and k in found.json and v is found[k]:
                kept.json[k] = found.json[k]
        state.update(kept)
        removed = []
        for k in deleted:
            if k not in kept and self._reducers.get(k, "last") == "last" and k in state:
                del state[k]
                removed.append(k)
        return kept, removed

    def _merge(self, key: str, current: Any, base: Any, value: Any, explicit: bool) -> Any:
        how = self._reducers.get(key, "last")
        if how == "last":
            return value
        if how in ("append", "extend"):
            cur = list(current) if isinstance(current, list) else []
            if explicit:
                return [*cur, value] if how == "append" else [*cur, *value]
            if isinstance(value, list) and isinstance(base, list) and value[: len(base)] == base:
                return [*cur, *value[len(base) :]]
            return [*cur, value] if how == "append" else [*cur, *value]
        if how == "merge":
            merged: dict[str, Any] = dict(current) if isinstance(current, Mapping) else {}
            if not isinstance(value, Mapping):
                raise TypeError(f"state key {key!r} uses reducer 'merge' but got {value!r}")
            if explicit or not isinstance(base, Mapping):
                merged.update(value)
            else:
                merged.update({k: v for k, v in value.items() if base.get(k, _MISSING) != v})
            return merged
        if how == "sum":
            cur_n = current if current is not _MISSING else 0
            if explicit or base is _MISSING:
                return cur_n + value
            return cur_n + (value - base)
        fn = self._functions.get(how)
        if fn is None:
            # (Bound before the run's code runs; a client, which binds none, cannot merge.)
            raise NodeResolutionError(reducers.missing(how), [how])
        # (A copy: the run's value is shared with the nodes still running, and a reducer may
        # change what it is given in place.)
        return fn(None if current is _MISSING else copy_value(current), value)
