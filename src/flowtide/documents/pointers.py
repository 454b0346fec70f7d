"""JSON pointers, and the map from pointers into native data back to the source document.

Validation speaks of the native shape (``/placements/3/routes/ok``); a user reading a JSON-LD
document needs ``/nodes/3/outputs/ok``. The reader records, while it translates, where each native
part came from; :class:`PointerMap` then translates any pointer by its longest recorded prefix.
"""

from __future__ import annotations

from flowtide.jsonpointer import escape, join, split
from flowtide.model.placements import KIND_NAMES

__all__ = ["PointerMap", "escape", "join", "split"]


class PointerMap:
    """Native pointer -> source pointer, by the longest recorded prefix."""

    def __init__(self) -> None:
        self._map: dict[tuple[str, ...], str] = {(): ""}
        self._kinds: dict[int, str] = {}

    def add(self, native: str, source: str) -> None:
        self._map[tuple(split(native))] = source

    def placement_kind(self, index: int, kind: str) -> None:
        """Record the kind of native placement ``index`` (to drop a validator's union tag)."""
        self._kinds[index] = kind

    def __call__(self, native: str) -> str:
        tokens = self._untagged(split(native))
        for cut in range(len(tokens), -1, -1):
            found = self._map.get(tuple(tokens[:cut]))
            if found is not None:
                return join(found, *tokens[cut:])
        return ""  # pragma: no cover - the root is always recorded

    def _untagged(self, tokens: list[str]) -> list[str]:
        """Drop the kind a tagged-union error location puts after ``/placements/<n>``.

        ``phase`` is both a kind and a field of phases: alone after the index it is the field.
        """
        if len(tokens) < 3 or tokens[0] != "placements" or not tokens[1].isdigit():
            return tokens
        tag = tokens[2]
        kind = self._kinds.get(int(tokens[1]))
        if tag in KIND_NAMES and kind in (None, tag) and (len(tokens) > 3 or tag != "phase"):
            return tokens[:2] + tokens[3:]
        return tokens

    @classmethod
    def identity(cls, data: object) -> PointerMap:
        """The map for native data: every pointer stays, less any union tag."""
        mapping = cls()
        placements = data.get("placements") if isinstance(data, dict) else None
        if isinstance(placements, list):
            for index, placement in enumerate(placements):
                kind = placement.get("kind") if isinstance(placement, dict) else None
                if isinstance(kind, str):
                    mapping.placement_kind(index, kind)
        return mapping
