"""flowtide.packing: values as bytes that give them back as they were."""

from __future__ import annotations

import array
from datetime import UTC, datetime
from typing import Any

from flowtide.engine import Lifecycle
from flowtide.packing import deep_copy, pack, unpack


def test_a_packed_value_comes_back_equal_with_its_types_and_shared_references() -> None:
    shared = [1, 2]
    value: dict[str, Any] = {
        "blob": bytearray(b"\x00"),
        "numbers": array.array("i", [1, 2]),
        "at": datetime(2026, 1, 1, tzinfo=UTC),
        "lifecycle": Lifecycle.PARKED,
        "tags": {"a"},
        "pair": (1, "x"),
        "one": shared,
        "two": shared,
    }
    packed = pack(value)
    assert isinstance(packed, bytes)
    back = unpack(packed)
    assert back == value
    assert [type(back[k]) for k in value] == [type(v) for v in value.values()]
    assert back["one"] is back["two"] and back["one"] is not shared


def test_what_pickle_refuses_is_not_packed_and_is_still_deep_copied() -> None:
    class Local:  # (defined in a function: pickle cannot find it again by its name)
        pass

    def fn() -> None: ...

    assert pack({"f": fn}) is None
    assert pack([Local()]) is None
    original: dict[str, Any] = {"items": [1, {"n": 2}], "f": fn}
    copied = deep_copy(original)
    assert copied == original
    assert copied["items"] is not original["items"]
    assert copied["items"][1] is not original["items"][1]
    assert copied["f"] is fn  # (functions are shared by deepcopy too)
