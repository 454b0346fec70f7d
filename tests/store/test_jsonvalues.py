"""JSON values: what every store keeps, and how a value that is not JSON is refused."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Any

import pytest

from flowtide.errors import FlowtideError
from flowtide.store import NotJSONError, StoreError, check_json
from flowtide.store.jsonvalues import EncodedState, decode_json, encode_json, encode_state


class Colour(StrEnum):
    RED = "red"


class Size(IntEnum):
    BIG = 3


def test_values_come_back_as_json_gives_them() -> None:
    value = {
        "t": (1, (2, "x")),
        "o": OrderedDict(a=1),
        "e": [Colour.RED, Size.BIG],
        "s": "é \u2713",
        "f": 0.1,
        "n": None,
        "b": False,
    }
    back = decode_json(encode_json(value, "state"))
    assert back == {
        "t": [1, [2, "x"]],
        "o": {"a": 1},
        "e": ["red", 3],
        "s": "é \u2713",
        "f": 0.1,
        "n": None,
        "b": False,
    }
    assert type(back["e"][0]) is str and type(back["o"]) is dict
    assert decode_json(encode_json(value, "state")) is not back


def contains_itself() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    return loop


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"order": {"items": [1, 2, {3}]}}, "state/order/items/2: a set is not JSON"),
        ({"at": datetime(2026, 1, 1, tzinfo=UTC)}, "state/at: a datetime is not JSON"),
        ({"day": date(2026, 1, 1)}, "state/day: a date is not JSON"),
        ({"wait": timedelta(1)}, "state/wait: a timedelta is not JSON"),
        ({"x": math.nan}, "state/x: nan is not JSON"),
        ({"x": [math.inf]}, "state/x/0: inf is not JSON"),
        ({"raw": b"1"}, "state/raw: a bytes is not JSON"),
        ({"price": Decimal("1.5")}, "state/price: a Decimal is not JSON"),
        ({"a/b": {"~c": object()}}, "state/a~1b/~0c: an object is not JSON"),
        ({"counts": {1: "one"}}, "state/counts: the key 1 is not JSON: keys must be strings"),
        (contains_itself(), "state/again: a value that contains itself is not JSON"),
    ],
)
def test_what_is_not_json_is_refused_where_it_is(value: Any, message: str) -> None:
    with pytest.raises(NotJSONError) as refused:
        check_json(value, "state")
    assert str(refused.value).startswith(message)
    assert refused.value.pointer == message.partition(": ")[0]
    with pytest.raises(NotJSONError):
        encode_json(value, "state")


def test_a_refusal_is_the_callers_mistake_not_the_stores() -> None:
    with pytest.raises(NotJSONError) as refused:
        check_json({1, 2}, "payload")
    error = refused.value
    assert isinstance(error, TypeError) and isinstance(error, FlowtideError)
    assert not isinstance(error, StoreError)
    assert (error.pointer, error.reason) == ("payload", "a set is not JSON")
    with pytest.raises(NotJSONError, match="keep an ISO 8601 string"):
        check_json(date(2026, 1, 1), "day")


def test_the_same_value_twice_is_not_a_value_that_contains_itself() -> None:
    shared = [1]
    check_json({"a": shared, "b": shared, "c": [shared, shared]}, "state")


@pytest.mark.parametrize("key", [1, 1.5, True, None])
@pytest.mark.parametrize(
    ("place", "pointer"),
    [
        (lambda bad: bad, "state"),
        (lambda bad: [{"a": 1}, [bad]], "state/1/0"),
        (lambda bad: {"a": [{"b": {}}, {"c": bad}]}, "state/a/1/c"),
        (lambda bad: ({"t": (bad,)},), "state/0/t/0"),
        (lambda bad: {"a": "b", "to": ["x", 1, bad]}, "state/to/2"),
    ],
)
def test_a_key_that_is_not_a_string_is_refused_at_any_depth(
    key: Any, place: Any, pointer: str
) -> None:
    # (The encoder would write it as a string, and the value would read back as another.)
    with pytest.raises(NotJSONError) as refused:
        encode_json(place({"ok": 1, key: "x"}), "state")
    assert refused.value.pointer == pointer
    assert "keys must be strings" in refused.value.reason


def test_keys_and_values_of_json_kinds_subclassed_are_json() -> None:
    value = {Colour.RED: [{Colour.RED: Size.BIG}], "o": OrderedDict(a=(1,))}
    assert decode_json(encode_json(value, "state")) == {"red": [{"red": 3}], "o": {"a": [1]}}


def test_the_text_a_state_carries_is_what_a_store_writes() -> None:
    state = EncodedState({"a": [1, 2], "b": {"c": 1}})
    state.json["a"] = "[1,2]"
    assert encode_state(state) == {"a": "[1,2]", "b": '{"c":1}'}
    with pytest.raises(NotJSONError, match="state/b"):
        encode_state(EncodedState({"b": {1, 2}}))


@pytest.mark.parametrize("value", [0, -7, 2**70, True, False, Size.BIG, 1.5, -0.0, 1e300])
def test_a_number_is_written_as_the_encoder_writes_it(value: Any) -> None:
    assert encode_json(value, "x") == json.dumps(value, separators=(",", ":"))
    assert encode_json([value], "x") == json.dumps([value], separators=(",", ":"))
