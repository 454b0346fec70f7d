"""The static warning about loops that park with no window bounding them."""

from typing import Any

import pytest

from flowtide.documents import load_flow
from flowtide.errors import Problem
from flowtide.model import Flow
from flowtide.model.graphs import strongly_connected
from flowtide.validation import build_flow, check_flow


def checkout(**collect_settings: Any) -> dict[str, Any]:
    collect: dict[str, Any] = {
        "id": "collect-payment",
        "kind": "task",
        "node": "urn:t:collect",
        "routes": {"paid": "paid", "declined": "offer-retry", "timeout": "expired"},
    }
    if collect_settings:
        collect["settings"] = collect_settings
    return {
        "id": "urn:t:checkout",
        "entrypoints": {"main": "collect-payment"},
        "node_types": [
            {"id": "urn:t:collect", "outputs": ["paid", "declined"], "parks": True},
            {"id": "urn:t:offer", "outputs": ["retry", "give-up"]},
        ],
        "placements": [
            collect,
            {
                "id": "offer-retry",
                "kind": "task",
                "node": "urn:t:offer",
                "routes": {"retry": "collect-payment", "give-up": "expired"},
            },
            {"id": "paid", "kind": "terminal"},
            {"id": "expired", "kind": "terminal", "outcome": "expired"},
        ],
    }


def loop_warnings(data: dict[str, Any]) -> list[Problem]:
    flow, problems = build_flow(data)
    assert flow is not None, problems
    return [p for p in problems if "no window bounds it" in p.message]


def test_a_parking_loop_rearmed_on_every_visit_is_reported() -> None:
    (warning,) = loop_warnings(checkout(timeout="PT10M"))
    assert warning.severity == "warning"
    assert warning.placement == "collect-payment"
    assert warning.pointer == "/placements/0"
    assert "'collect-payment', 'offer-retry'" in warning.message


def test_a_parked_output_marks_a_parking_node_too() -> None:
    data = checkout()
    data["node_types"][0]["parks"] = False
    data["placements"][0]["routes"]["parked"] = "expired"
    assert len(loop_warnings(data)) == 1


@pytest.mark.parametrize("anchor", ["node", "instance"])
def test_a_node_or_instance_anchored_timeout_bounds_the_loop(anchor: str) -> None:
    assert loop_warnings(checkout(timeout="PT10M", timeout_anchor=anchor)) == []


def test_an_interrupting_timer_with_a_global_anchor_bounds_the_loop() -> None:
    timer = {"after": "PT10M", "output": "timeout", "interrupting": True, "anchor": "node"}
    assert loop_warnings(checkout(timers=[timer])) == []
    timer["anchor"] = "park"
    assert len(loop_warnings(checkout(timers=[timer]))) == 1


def test_a_run_deadline_bounds_the_loop() -> None:
    data = checkout()
    data["deadline"] = "PT1H"
    assert loop_warnings(data) == []


def test_a_loop_without_parking_is_not_reported() -> None:
    data = checkout()
    data["node_types"][0]["parks"] = False
    assert loop_warnings(data) == []


def test_a_wait_branch_into_a_first_join_bounds_the_loop() -> None:
    data = checkout()
    data["node_types"].append({"id": "urn:t:open", "outputs": ["opened"]})
    data["entrypoints"] = {"main": "open"}
    data["placements"] += [
        {
            "id": "open",
            "kind": "task",
            "node": "urn:t:open",
            "routes": {"opened": ["collect-payment", "window"]},
        },
        {"id": "window", "kind": "wait", "duration": "PT10M", "routes": {"elapsed": "race"}},
        {"id": "race", "kind": "join", "mode": "first", "routes": {"success": "paid"}},
    ]
    data["placements"][0]["routes"]["paid"] = "race"
    assert loop_warnings(data) == []
    # The same shape with an 'all' join does not bound anything.
    data["placements"][-1]["mode"] = "all"
    assert len(loop_warnings(data)) == 1


@pytest.mark.parametrize(
    "name", ["checkout-node-anchor.yaml", "checkout-wait-branch.yaml", "escalation-ladder.yaml"]
)
def test_the_examples_are_bounded(name: str) -> None:
    flow = load_flow(f"examples/{name}")
    assert isinstance(flow, Flow)
    assert any(t.parks for t in flow.node_types), "the example should have a parking node"
    assert not [p for p in check_flow(flow) if "no window bounds it" in p.message]


def test_strongly_connected_components() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"d"}, "d": {"c"}, "e": {"e"}}
    components = sorted(sorted(c) for c in strongly_connected(graph))
    assert components == [["a", "b"], ["c", "d"], ["e"]]
