"""A node's state, copied as the node touches it: what it mutates never reaches the run's state,
and what it changed is found among the keys it touched."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

from flowtide.engine.state.limits import checked
from flowtide.engine.state.nodestate import NodeState
from flowtide.engine.state.reducers import StateMerger
from flowtide.store.jsonvalues import EncodedState


def committed() -> dict[str, Any]:
    return {"n": 1, "items": [1, 2], "doc": {"a": {"b": [1]}}, "name": "x"}


def test_a_value_never_read_is_shared_and_unchanged() -> None:
    base = committed()
    state = NodeState(base)
    assert state.changes() == ({}, [])
    assert dict.__getitem__(state, "doc") is base["doc"]  # (no copy made)


def test_a_read_container_is_a_copy_the_node_owns() -> None:
    base = committed()
    state = NodeState(base)
    items = state["items"]
    assert items == [1, 2] and items is not base["items"]
    items.append(3)
    assert state["items"] is items  # (the one copy, from then on)
    assert base["items"] == [1, 2]
    assert state.changes() == ({"items": [1, 2, 3]}, [])


def test_a_nested_read_and_mutation_stays_in_the_copy() -> None:
    base = committed()
    state = NodeState(base)
    state["doc"]["a"]["b"].append(2)
    assert base["doc"] == {"a": {"b": [1]}}
    assert state.changes() == ({"doc": {"a": {"b": [1, 2]}}}, [])


def test_as_stored_copies_nothing_and_keeps_the_copies_made() -> None:
    base = committed()
    state = NodeState(base)
    state["items"].append(3)
    state["new"] = {"k": 1}
    stored = state.as_stored()
    assert type(stored) is dict and stored == {**base, "items": [1, 2, 3], "new": {"k": 1}}
    assert stored["doc"] is base["doc"]  # (never read: still the run's, not copied now)
    assert stored["items"] is dict.__getitem__(state, "items")  # (the node's own copy)


def test_a_read_without_a_change_is_no_change() -> None:
    state = NodeState(committed())
    assert state["doc"] == {"a": {"b": [1]}}
    assert state.get("items") == [1, 2]
    assert state.changes() == ({}, [])


def test_writes_and_deletes() -> None:
    base = committed()
    state = NodeState(base)
    state["n"] += 1
    state["new"] = {"k": 1}
    del state["name"]
    state.pop("items")
    changed, deleted = state.changes()
    assert changed == {"n": 2, "new": {"k": 1}}
    assert sorted(deleted) == ["items", "name"]
    assert base == committed()


def test_a_key_deleted_and_another_added_are_both_found() -> None:
    state = NodeState({"a": 1})
    del state["a"]
    state["b"] = 1
    assert state.changes() == ({"b": 1}, ["a"])


def test_a_key_set_back_to_an_equal_value_is_no_change() -> None:
    state = NodeState(committed())
    state["items"] = [1, 2]
    state["n"] = 1
    assert state.changes() == ({}, [])


def test_a_type_change_is_a_change() -> None:
    state = NodeState({"n": 1})
    state["n"] = 1.0
    assert state.changes() == ({"n": 1.0}, [])


@pytest.mark.parametrize(
    "take",
    [
        lambda s: s.get("items"),
        lambda s: s.pop("items"),
        lambda s: s.setdefault("items", []),
        lambda s: s.popitem()[1] if list(s)[-1] == "items" else None,
        lambda s: next(v for k, v in s.items() if k == "items"),
        lambda s: next(v for v in s.values() if isinstance(v, list)),
        lambda s: next(v for k, v in reversed(s.items()) if k == "items"),
        lambda s: s.copy()["items"],
        lambda s: dict(s)["items"],
        lambda s: {**s}["items"],
        lambda s: (s | {})["items"],
        lambda s: ({} | s)["items"],
        lambda s: copy.copy(s)["items"],
        lambda s: copy.deepcopy(s)["items"],
        lambda s: pickle.loads(pickle.dumps(s))["items"],
    ],
)
def test_every_way_of_reading_a_value_gives_one_the_run_does_not_share(take: Any) -> None:
    base = {"n": 1, "items": [1, 2]}
    state = NodeState(base)
    items = take(state)
    assert items == [1, 2]
    items.append(3)
    assert base == {"n": 1, "items": [1, 2]}


def test_a_copy_of_the_mapping_is_a_plain_dict_of_what_the_node_sees() -> None:
    state = NodeState(committed())
    plain = state.copy()
    assert type(plain) is dict and plain == committed()
    plain["items"].append(3)  # (as with dict.copy: the same objects the node has)
    assert state["items"] == [1, 2, 3]
    assert type(pickle.loads(pickle.dumps(state))) is dict
    assert type(NodeState.fromkeys(["a"])) is dict


def test_it_is_a_dict_to_the_node_and_to_json() -> None:
    state = NodeState(committed())
    assert isinstance(state, dict)
    assert json.loads(json.dumps(state)) == committed()
    assert state == committed()
    assert len(state) == 4 and "doc" in state and list(state) == list(committed())


def test_update_and_setdefault_write() -> None:
    state = NodeState({"a": 1})
    state.update(b=2)
    state |= {"c": 3}
    assert state.setdefault("d", [4]) == [4]
    assert state.changes() == ({"b": 2, "c": 3, "d": [4]}, [])


def test_the_merger_takes_the_node_state_changes_with_their_json_text() -> None:
    merger = StateMerger({"items": "append"})
    base = {"n": 1, "items": [1]}
    state = NodeState(base)
    state["n"] = 2
    state["items"].append(2)
    changed, deleted = merger.changes(base, state, None)
    assert changed == {"n": 2, "items": [1, 2]} and deleted == []
    assert changed.json == {"n": "2", "items": "[1,2]"}
    run = {"n": 1, "items": [1, 9]}  # (another branch appended 9 meanwhile)
    written, removed = merger.apply(run, base, changed, deleted, {})
    assert removed == []
    assert run == {"n": 2, "items": [1, 9, 2]}
    assert isinstance(written, EncodedState)
    # The value written as the node left it keeps its text; a merged one is left to the store.
    assert written.json == {"n": "2"}


def test_the_merger_compares_a_whole_state_sent_back() -> None:
    merger = StateMerger({})
    base = {"n": 1, "gone": 1}
    changed, deleted = merger.changes(base, {"n": 2}, None)
    assert changed == {"n": 2} and deleted == ["gone"]
    assert changed.json == {"n": "2"}


def test_an_update_written_as_given_keeps_its_text() -> None:
    merger = StateMerger({"log": "append"})
    run: dict[str, Any] = {"n": 1, "log": []}
    update = checked({"n": 5, "log": "x"}, "update", None)
    written, _ = merger.apply(run, dict(run), checked({}, "state", None), [], update)
    assert written == {"n": 5, "log": ["x"]} and written.json == {"n": "5"}


def test_a_reducer_that_changes_what_it_is_given_changes_a_copy() -> None:
    def into(current: list[int], value: int) -> list[int]:
        current.append(value)
        return current

    run: dict[str, Any] = {"seen": [1]}
    shared = run["seen"]  # (as a node still running shares it)
    merger = StateMerger({"seen": "into"}, {"into": into})
    merger.apply(run, dict(run), {}, [], {"seen": 2})
    assert run == {"seen": [1, 2]} and shared == [1]
