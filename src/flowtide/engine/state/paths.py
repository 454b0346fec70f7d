"""Dotted state paths (``customer.address.city``) for scatter sources, mappings and gathers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING = object()


def get_path(state: Mapping[str, Any], path: str, default: Any = None) -> Any:
    current: Any = state
    for part in path.split("."):
        if isinstance(current, Mapping):
            current = current.get(part, _MISSING)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return default
        if current is _MISSING:
            return default
    return current


def set_path(state: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path``, creating intermediate mappings (copies of them, so shared ones stay intact)."""
    parts = path.split(".")
    if any(p in ("__proto__", "__class__") or not p for p in parts):
        raise ValueError(f"invalid state path {path!r}")
    current = state
    for part in parts[:-1]:
        nxt = current.get(part)
        nxt = dict(nxt) if isinstance(nxt, Mapping) else {}
        current[part] = nxt
        current = nxt
    current[parts[-1]] = value
