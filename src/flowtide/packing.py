"""Values as bytes that give them back as they were: how the memory store keeps a run's data and
the engine's record of recent ends, and how the engine copies state for a node.

pickle, not marshal: marshal writes any object with a buffer (a bytearray, a memoryview, an
``array.array``, a NumPy array) as plain bytes, so such a value would come back as another type,
and it refuses datetimes and enum members. pickle keeps every type and the references shared
inside a value, and for the small dicts and lists of a run it is about as fast both ways (and
three to five times faster than ``copy.deepcopy``). Bytes are never tracked by the cyclic garbage
collector: a packed value costs it nothing, however long it is kept.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

__all__ = ["deep_copy", "pack", "unpack"]

PROTOCOL = pickle.HIGHEST_PROTOCOL

_dumps = pickle.dumps
unpack = pickle.loads
"""The value :func:`pack` was given: a new one, equal to it (new containers throughout)."""


def pack(value: Any) -> bytes | None:
    """``value`` as bytes, or None when pickle does not take it: a lambda, a generator, a lock,
    an instance of a class defined inside a function, an object whose own pickling fails."""
    try:
        return _dumps(value, PROTOCOL)
    except Exception:  # whatever a value's own __reduce__ raises: the caller keeps it as it is
        return None


def deep_copy(value: Any) -> Any:
    """A deep copy of ``value``: through pickle when it takes it, else ``copy.deepcopy``."""
    try:
        return unpack(_dumps(value, PROTOCOL))
    except Exception:
        return copy.deepcopy(value)
