"""``check_flow`` and ``build_flow`` on cases the samples do not show: registries, catalogs,
effective settings, pointer maps, and what a partly readable document still gets checked for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowtide.authoring import NodeRegistry, node
from flowtide.errors import Problem
from flowtide.model import Flow, NodeType, Terminal
from flowtide.validation import CHECKS, build_flow, check_flow
from flowtide.validation.subject import Subject


@node(outputs=["paid", "declined"], id="urn:test:node:pay", register=False)
def pay(ctx: Any) -> str:
    return "paid"


@node(
    outputs=["ok"],
    id="urn:test:node:slow",
    timers=[{"after": "PT1M", "output": "nudge"}],
    timeout="PT5M",
    timeout_anchor="node",
    release_on=["gone"],
    register=False,
)
def slow(ctx: Any) -> str:
    return "ok"


def _flow(*placements: dict[str, Any], **top: Any) -> dict[str, Any]:
    first = placements[0]["id"]
    return {
        "id": "urn:test:flow",
        "entrypoints": {"main": first},
        "placements": list(placements),
        **top,
    }


END = {"id": "end", "kind": "terminal"}


def _errors(problems: list[Problem]) -> list[tuple[str, str]]:
    return [(p.pointer, p.message) for p in problems if p.severity == "error"]


def _at(problems: list[Problem], pointer: str) -> Problem:
    found = [p for p in problems if p.pointer == pointer]
    assert len(found) == 1, [str(p) for p in problems]
    return found[0]


def test_a_sound_flow_has_no_problems() -> None:
    data = _flow(
        {
            "id": "pay",
            "kind": "task",
            "node": "urn:test:node:pay",
            "routes": {"paid": "end", "declined": "end"},
        },
        END,
        node_types=[{"id": "urn:test:node:pay", "outputs": ["paid", "declined"]}],
    )
    flow, problems = build_flow(data)
    assert problems == []
    assert flow is not None
    assert check_flow(flow) == []


def test_the_registry_declares_outputs_the_document_does_not() -> None:
    registry = NodeRegistry({pay.id: pay})
    data = _flow(
        {"id": "pay", "kind": "task", "node": pay.id, "routes": {"paid": "end", "refunded": "end"}},
        END,
    )
    _, problems = build_flow(data, registry=registry)
    problem = _at(problems, "/placements/0/routes/refunded")
    assert problem.placement == "pay"
    assert "has no output 'refunded' (it declares: paid, declined" in problem.message
    warning = _at(problems, "/placements/0/routes")
    assert warning.severity == "warning" and "'declined'" in warning.message
    assert not any("not declared" in p.message for p in problems)
    _, unchecked = build_flow(data)
    assert _errors(unchecked) == []
    assert "cannot be checked" in _at(unchecked, "/placements/0/node").message


def test_node_defaults_count_in_the_effective_settings() -> None:
    registry = NodeRegistry({slow.id: slow})
    data = _flow({"id": "s", "kind": "task", "node": slow.id, "routes": {"ok": "end"}}, END)
    _, problems = build_flow(data, registry=registry)
    assert "timer 0 takes output 'nudge'" in _at(problems, "/placements/0/routes").message
    release = _at(problems, "/placements/0/node")
    assert "default release_on of node 'urn:test:node:slow' names output 'gone'" in release.message

    routed = _flow(
        {
            "id": "s",
            "kind": "task",
            "node": slow.id,
            "routes": {"ok": "end", "nudge": "end"},
            "settings": {"release_on": ["ok"]},
        },
        END,
    )
    assert build_flow(routed, registry=registry)[1] == []


def test_a_placement_override_replaces_the_node_anchor() -> None:
    registry = NodeRegistry({slow.id: slow})
    data = _flow(
        {
            "id": "s",
            "kind": "task",
            "node": slow.id,
            "routes": {"ok": "end", "nudge": "end"},
            "settings": {"timeout_anchor": "park", "release_on": ["ok"]},
        },
        END,
    )
    _, problems = build_flow(data, registry=registry)
    warning = _at(problems, "/placements/0/settings/release_on")
    assert warning.severity == "warning" and "'park', not 'node'" in warning.message


def test_a_flow_may_embed_itself_and_others_from_the_catalog() -> None:
    child, _ = build_flow(_flow({"id": "end", "kind": "terminal"}, id="urn:test:child"))
    assert child is not None
    data = _flow(
        {
            "id": "me",
            "kind": "subflow",
            "flow": "urn:test:flow",
            "routes": {"success": "kid", "error": "end"},
        },
        {
            "id": "kid",
            "kind": "subflow",
            "flow": "urn:test:child",
            "routes": {"success": "end", "error": "end"},
        },
        END,
    )
    assert _errors(build_flow(data, catalog={child.id: child})[1]) == []
    problem = _at(build_flow(data)[1], "/placements/1/flow")
    assert "'urn:test:child', which is not known (known flows: urn:test:flow)" in problem.message


def test_timeout_is_routable_on_kinds_with_settings_only() -> None:
    data = _flow(
        {"id": "go", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "sub"}},
        {
            "id": "sub",
            "kind": "subflow",
            "flow": "urn:test:flow",
            "routes": {"success": "end", "error": "end", "timeout": "end", "late": "end"},
            "settings": {"timeout": "PT1M", "timers": [{"after": "PT30S", "output": "late"}]},
        },
        END,
    )
    assert build_flow(data)[1] == []


def test_branches_of_a_join_are_distinct_sources_or_outputs() -> None:
    data = _flow(
        {"id": "pay", "kind": "task", "node": pay.id, "routes": {"paid": "j", "declined": "j"}},
        {"id": "j", "kind": "join", "mode": "quorum", "quorum": 2, "routes": {"success": "end"}},
        END,
        node_types=[{"id": pay.id, "outputs": ["paid", "declined"]}],
    )
    assert build_flow(data)[1] == []
    data["placements"][0]["routes"] = {"paid": ["j", "j"], "declined": "end"}
    _, problems = build_flow(data)
    assert "has 1 incoming branch (from 'pay' on 'paid')" in _at(problems, "/placements/1").message
    assert "quorum of 2, but only 1 branch lead" in _at(problems, "/placements/1/quorum").message


def test_check_flow_reports_duplicates_in_a_built_flow() -> None:
    flow = Flow.model_validate(
        _flow(
            {"id": "a", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "end"}},
            END,
            {"id": "a", "kind": "terminal"},
        )
    )
    (problem,) = check_flow(flow)
    assert problem.pointer == "/placements/2/id" and problem.placement == "a"


def test_pointer_map_translates_every_pointer() -> None:
    data = _flow(
        {"id": "a", "kind": "wait", "duration": "soon", "routes": {"elapsed": "b"}},
        {"id": "b", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": ["gone", "end"]}},
        END,
    )
    _, problems = build_flow(data, pointer_map=lambda p: "/doc" + p)
    assert sorted(p.pointer for p in problems) == [
        "/doc/placements/0/duration",
        "/doc/placements/1/routes/elapsed/0",
    ]


def test_pointers_escape_slashes_and_tildes() -> None:
    data = _flow(
        {"id": "a", "kind": "task", "node": "n", "routes": {"ok/fine~": "urn:x/y"}},
        END,
    )
    _, problems = build_flow(data)
    assert _errors(problems)[0][0] == "/placements/0/routes/ok~1fine~0"


def test_routes_to_unreadable_placements_are_not_missing() -> None:
    data = _flow(
        {"id": "a", "kind": "task", "node": "n", "routes": {"x": "broken", "y": "opaque"}},
        {"id": "broken", "kind": "wait", "duration": "never", "routes": {"elapsed": "after"}},
        {"id": "after", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "end"}},
        {"id": "opaque", "kind": "mystery", "routes": {"done": "end"}},
        END,
    )
    _, problems = build_flow(data)
    # 'after' is reached through the unreadable 'broken': neither unreachable nor a dead end.
    assert [p for p, _ in _errors(problems)] == ["/placements/1/duration", "/placements/3/kind"]


def test_unknown_routes_of_an_unreadable_placement_stop_reachability_checks() -> None:
    data = _flow(
        {"id": "a", "kind": "task", "node": "n", "routes": {"x": "broken"}},
        {"id": "broken", "kind": "wait", "routes": 12},
        {"id": "island", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "end"}},
        END,
    )
    _, problems = build_flow(data)
    # 'island' is not reported: 'broken' might have led to it.
    assert [p for p, _ in _errors(problems)] == ["/placements/1/routes"]


def test_a_broken_entrypoint_does_not_make_everything_unreachable() -> None:
    data = _flow(
        {"id": "setup", "kind": "phase", "phase": "pre", "node": "n"},
        {"id": "a", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "end"}},
        END,
    )
    _, problems = build_flow(data)
    assert [p for p, _ in _errors(problems)] == ["/entrypoints/main"]


def test_non_text_keys_are_reported_not_raised() -> None:
    data = _flow({"id": "end", "kind": "terminal"}, entrypoints={1: "end"})
    _, problems = build_flow(data)
    assert [(p.pointer, p.message) for p in problems] == [
        ("/entrypoints/1", "the key 1 of 'entrypoints' must be text")
    ]


@pytest.mark.parametrize(
    ("data", "ending"),
    [(None, "the document is empty"), ("flow", "not text"), (3.5, "not a number")],
)
def test_a_document_that_is_not_a_mapping(data: Any, ending: str) -> None:
    flow, problems = build_flow(data)
    assert flow is None
    (problem,) = problems
    assert problem.pointer == "" and problem.message.endswith(ending)


def test_only_valid_placements_and_empty_placements() -> None:
    _, problems = build_flow({"id": "urn:x", "entrypoints": {"main": "a"}, "placements": []})
    assert [(p.pointer, p.message) for p in problems] == [
        ("/placements", "a flow needs at least one placement")
    ]
    _, problems = build_flow({"id": "urn:x", "entrypoints": {"main": "a"}, "placements": [1, None]})
    assert [p.pointer for p in problems] == ["/placements/0", "/placements/1"]


@pytest.mark.parametrize(
    ("settings", "pointer", "message"),
    [
        ({"timeout": "PT0S"}, "/timeout", "a timeout must be greater than zero"),
        ({"timeout": "-PT1M"}, "/timeout", "'-PT1M' is not an ISO 8601 duration"),
        ({"timeout": "P2Y"}, "/timeout", "uses years or months"),
        ({"timeout": 10**40}, "/timeout", "is too long"),
        (
            {"timeout_anchor": "nod"},
            "/timeout_anchor",
            "unknown timeout anchor 'nod' (anchors: park, instance, node)",
        ),
        (
            {"retry": {"backoff": "wild"}},
            "/retry/backoff",
            "unknown backoff 'wild' (backoffs: fixed, linear",
        ),
        (
            {"retry": {"max_attempts": 0}},
            "/retry/max_attempts",
            "'max_attempts' must be at least 1, not 0",
        ),
        ({"release_on": "paid"}, "/release_on", "'release_on' must be a list, not text"),
        ({"timers": [{"output": "x"}]}, "/timers/0/after", "'after' is required"),
        (
            {"timout": "PT1M"},
            "/timout",
            "unknown setting 'timout' (settings: timeout, timeout_anchor",
        ),
    ],
)
def test_setting_values_are_told_plainly(
    settings: dict[str, Any], pointer: str, message: str
) -> None:
    data = _flow(
        {"id": "a", "kind": "task", "node": "n", "routes": {"done": "end"}, "settings": settings},
        END,
    )
    _, problems = build_flow(data)
    (problem,) = [p for p in problems if p.severity == "error"]
    assert problem.pointer == "/placements/0/settings" + pointer
    assert message in problem.message
    assert problem.placement == "a"


def test_checks_are_small_functions_with_docstrings() -> None:
    assert len(CHECKS) == len(set(CHECKS))
    assert all(check.__doc__ for check in CHECKS)


def test_a_list_of_one_target_is_pointed_into() -> None:
    data = _flow(
        {"id": "a", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": ["gone"]}}, END
    )
    _, problems = build_flow(data)
    assert [p.pointer for p in problems if p.severity == "error"] == [
        "/placements/0/routes/elapsed/0",
        "/placements/1",
    ]


@pytest.mark.parametrize(
    ("placement", "pointer", "message"),
    [
        (
            {"kind": "wait", "until": "tomorrow"},
            "/until",
            "'until' must be an instant with a time zone",
        ),
        ({"kind": "wait", "until": "2026-01-01T00:00:00"}, "/until", "'until' needs a time zone"),
        (
            {"kind": "wait", "duration": "PT1S", "until": "2026-01-01T00:00:00Z"},
            "",
            "exactly one of",
        ),
        (
            {"kind": "join", "mode": "some"},
            "/mode",
            "unknown join mode 'some' (modes: all, first, quorum)",
        ),
        (
            {"kind": "join", "mode": "quorum", "quorum": 0},
            "/quorum",
            "'quorum' must be at least 1, not 0",
        ),
        ({"kind": "join", "quorum": 2}, "", "'quorum' is only for mode 'quorum'"),
        (
            {"kind": "phase", "node": "n", "phase": "during"},
            "/phase",
            "unknown phase 'during' (phases: pre, post)",
        ),
        ({"kind": "phase", "node": "n"}, "/phase", "'phase' is required"),
        ({"kind": "task"}, "/node", "'node' is required"),
        (
            {"kind": "terminal", "routes": {}},
            "/routes",
            "unknown field 'routes' (fields: kind, id, name, description, outcome)",
        ),
        (
            {"kind": "scatter", "source": "s", "body": {"node": "n"}, "gather": {"how": 1}},
            "/gather/how",
            "unknown field 'how' (fields: strategy, target, field, key, reducer, initial)",
        ),
        (
            {
                "kind": "scatter",
                "source": "s",
                "body": {"node": "n"},
                "batch": {"key": "k"},
                "throttle": 1,
            },
            "",
            "a throttle or keyed batches, not both",
        ),
        (
            {"kind": "subflow", "flow": "urn:test:flow", "input": []},
            "/input",
            "'input' must be a mapping, not a list",
        ),
    ],
)
def test_placement_values_are_told_plainly(
    placement: dict[str, Any], pointer: str, message: str
) -> None:
    data = _flow({"id": "p", **placement}, END, entrypoints={"main": "p", "last": "end"})
    _, problems = build_flow(data)
    assert [p.pointer for p in problems if p.severity == "error"] == ["/placements/0" + pointer]
    assert message in problems[0].message


class _Walked(tuple[NodeType, ...]):
    """Node types that count how often they are walked through."""

    walks = 0

    def __iter__(self) -> Iterator[NodeType]:
        type(self).walks += 1
        return super().__iter__()


def test_node_types_are_found_by_id_not_by_walking_every_declaration() -> None:
    declared = [NodeType(id=f"urn:test:node:{i}", outputs=["ok"]) for i in range(200)]
    twice = NodeType(id="urn:test:node:7", outputs=["other"])
    flow = Flow.model_construct(
        id="urn:test:flow",
        entrypoints={"main": "end"},
        placements=(Terminal(id="end"),),
        node_types=_Walked([*declared, twice]),
    )
    subject = Subject(flow)
    for index, node_type in enumerate(declared):
        found = subject.node_type(node_type.id)
        assert found is not None
        assert (found.type, found.pointer) == (node_type, f"/node_types/{index}")
    assert _Walked.walks <= 1
