"""The engine's record of recent ends: what ``wait`` answers without reading the store."""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from typing import Any

from flowtide.engine import ErrorInfo, Lifecycle, RunResult
from flowtide.engine.ends import RecentEnds


def ended(run_id: str, state: dict[str, Any], **more: Any) -> RunResult:
    return RunResult(run_id, Lifecycle.COMPLETED, "done", state, terminals=("done",), **more)


def test_a_result_reads_back_equal_with_a_state_of_its_own() -> None:
    ends = RecentEnds(10)
    original = ended("r", {"order": {"lines": [1, 2.5, None, "x"]}, "paid": True, "b": b"\x00"})
    ends.add(original)
    first = ends.get("r")
    assert first == original and first is not None
    assert first.lifecycle is Lifecycle.COMPLETED
    first.state["order"]["lines"].append("changed by the caller")
    again = ends.get("r")
    assert again == original and again is not None
    assert again.state["order"]["lines"] == [1, 2.5, None, "x"]
    assert ends.get("unknown") is None


def test_a_plain_result_is_untracked_by_the_collector_at_its_first_young_collection() -> None:
    # What the collector still tracks after a young collection moves to the older generations;
    # enough of those survivors start full collections (see flowtide.engine.ends).
    ends = RecentEnds(10)
    ends.add(ended("r", {"n": 1, "items": ["a", "b"], "nested": {"k": "v"}}))
    gc.collect(0)
    assert not gc.is_tracked(ends._kept["r"])


def test_any_type_pickle_takes_reads_back_as_that_type() -> None:
    ends = RecentEnds(10)
    state = {
        "at": datetime(2026, 1, 1, tzinfo=UTC),
        "lifecycle": Lifecycle.PARKED,
        "blob": bytearray(b"\x00\x01"),
        "shared": [[1], [1]],
    }
    state["same"] = [state["shared"], state["shared"]]
    ends.add(ended("r", state))
    back = ends.get("r")
    assert back is not None and back.state == state
    assert type(back.state["blob"]) is bytearray and back.state["lifecycle"] is Lifecycle.PARKED
    assert back.state["same"][0] is back.state["same"][1]  # shared inside the value, still


def test_results_with_more_to_say_or_a_state_pickle_refuses_are_kept_as_they_are() -> None:
    ends = RecentEnds(10)
    odd = [
        ended("unpicklable", {"f": lambda: None}),
        ended("failed", {}, errors=(ErrorInfo("ValueError", "boom", "p"),)),
        ended("warned", {}, warnings=("late",)),
    ]
    for result in odd:
        ends.add(result)
    for result in odd:
        assert ends.get(result.run_id) is result


def test_the_oldest_result_is_dropped_first() -> None:
    ends = RecentEnds(3)
    for i in range(5):
        ends.add(ended(f"r{i}", {"i": i}))
    assert ends.run_ids() == ["r2", "r3", "r4"] and len(ends) == 3
    assert ends.get("r1") is None
    kept = ends.get("r2")
    assert kept is not None and kept.state == {"i": 2}
