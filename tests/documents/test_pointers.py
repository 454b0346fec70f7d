"""Problems point into the document the user wrote, whatever its format."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.documents import load_flow, to_jsonld
from flowtide.documents.pointers import PointerMap, escape, join, split
from flowtide.errors import FlowValidationError, Problem
from tests.documents.samples import fixture_document, rich_data, rich_flow

FLOW_ID = "urn:noocodec:dag:support-dispatcher"


def _errors(doc: Any, **kwargs: Any) -> list[Problem]:
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc, **kwargs)
    return list(caught.value.errors)


def _pointers(doc: Any) -> set[str]:
    return {p.pointer for p in _errors(doc)}


def test_route_to_a_missing_placement() -> None:
    doc = fixture_document()
    doc["nodes"][1]["outputs"]["routine"] = f"{FLOW_ID}/node/nowhere"
    problems = _errors(doc)
    assert "/nodes/1/outputs/routine" in {p.pointer for p in problems}
    assert all(not p.pointer.startswith("/placements") for p in problems)


def test_renamed_terms_are_pointed_at_by_their_own_names() -> None:
    doc = fixture_document()
    doc["@context"]["links"] = doc["@context"].pop("outputs")
    for node in doc["nodes"]:
        if "outputs" in node:
            node["links"] = node.pop("outputs")
    doc["nodes"][1]["links"]["routine"] = f"{FLOW_ID}/node/nowhere"
    assert "/nodes/1/links/routine" in _pointers(doc)


def test_entrypoint_to_a_missing_placement() -> None:
    doc = fixture_document()
    doc["entrypoints"]["main"] = f"{FLOW_ID}/node/nowhere"
    assert any(p.startswith("/entrypoints") for p in _pointers(doc))


def test_bad_settings_point_at_the_flattened_terms() -> None:
    doc = to_jsonld(rich_flow())
    charge = doc["nodes"][1]
    charge["timeout"] = "ten minutes"
    charge["timers"][1]["after"] = "soon"
    charge["retry"]["backoff"] = "sometimes"
    pointers = _pointers(doc)
    assert "/nodes/1/timeout" in pointers
    assert "/nodes/1/timers/1/after" in pointers
    assert "/nodes/1/retry/backoff" in pointers


def test_scatter_execution_and_reservoir() -> None:
    doc = to_jsonld(rich_flow())
    scatter = doc["nodes"][4]
    assert scatter["@type"] == "ScatterNode"
    scatter["execution"]["concurrency"] = 0
    scatter["execution"]["reservoir"]["capacity"] = 0
    scatter["itemKey"] = ""
    pointers = _pointers(doc)
    assert "/nodes/4/execution/concurrency" in pointers
    assert "/nodes/4/execution/reservoir/capacity" in pointers
    assert "/nodes/4/itemKey" in pointers


def test_unknown_placement_type() -> None:
    doc = fixture_document()
    doc["nodes"][2]["@type"] = "Placement"
    (problem,) = _errors(doc)
    assert problem.pointer == "/nodes/2/@type"
    assert problem.placement == "ai-compose"


def test_unknown_placement_type_names_what_it_got_and_the_nearest_class() -> None:
    doc = fixture_document()
    doc["@context"]["dag"] = "https://noocodec.dev/ontology/dag/"
    doc["nodes"][2]["@type"] = "dag:SingleNod"
    (problem,) = _errors(doc)
    assert problem.message.startswith(
        "@type 'dag:SingleNod' (https://noocodec.dev/ontology/dag/SingleNod) names no "
        "placement class; the nearest is 'SingleNode' "
        "(https://noocodec.dev/ontology/dag/SingleNode), a task"
    )


@pytest.mark.parametrize(
    ("written", "as_written", "nearest"),
    [
        ("Termnal", "'Termnal' (not a term of the document's @context)", "'TerminalNode'"),
        ("https://example.org/types#Wait", "'https://example.org/types#Wait'", "'Wait'"),
        ("scatter", "'scatter' (not a term of the document's @context)", "'ScatterNode'"),
    ],
)
def test_unknown_placement_type_as_written(written: str, as_written: str, nearest: str) -> None:
    doc = fixture_document()
    doc["nodes"][2]["@type"] = written
    (problem,) = _errors(doc)
    assert problem.message.startswith(f"@type {as_written} names no placement class")
    assert f"the nearest is {nearest}" in problem.message


def test_unknown_placement_type_far_from_every_class_names_the_classes() -> None:
    doc = fixture_document()
    doc["nodes"][2]["@type"] = "Placement"
    (problem,) = _errors(doc)
    assert "nearest" not in problem.message
    assert "(classes: SingleNode (task), TerminalNode (terminal)" in problem.message


def test_a_duplicate_placement_id_points_at_the_first_as_written() -> None:
    doc = fixture_document()
    doc["nodes"][5]["@id"] = doc["nodes"][4]["@id"]
    doc["nodes"][3]["outputs"] = {"sent": f"{FLOW_ID}/node/end"}  # nothing leads to 'decline'
    duplicate = next(p for p in _errors(doc) if "used twice" in p.message)
    assert duplicate.pointer == "/nodes/5/@id"
    assert duplicate.message == "placement id 'send-response' is used twice (first at /nodes/4)"


def test_setting_on_a_kind_without_settings() -> None:
    doc = fixture_document()
    doc["@context"]["timeout"] = "https://flowtide.dev/ns#timeout"
    doc["nodes"][6]["timeout"] = "PT1M"
    (problem,) = _errors(doc)
    assert problem.pointer == "/nodes/6/timeout"
    assert "does not apply to a terminal" in problem.message


def test_native_documents_keep_their_pointers() -> None:
    data = rich_data()
    data["placements"][1]["settings"]["timeout"] = "never"
    data["placements"][5]["quorum"] = 0
    pointers = _pointers(data)
    assert "/placements/1/settings/timeout" in pointers
    assert "/placements/5/quorum" in pointers


def test_pointer_tokens_are_escaped() -> None:
    assert escape("a/b~c") == "a~1b~0c"
    assert join("/x", "a/b", 3) == "/x/a~1b/3"
    assert split("/x/a~1b~0c/3") == ["x", "a/b~c", "3"]
    assert split("") == []


def test_pointer_map_uses_the_longest_prefix() -> None:
    pmap = PointerMap()
    pmap.add("/placements", "/nodes")
    pmap.add("/placements/0", "/nodes/0")
    pmap.add("/placements/0/routes", "/nodes/0/outputs")
    pmap.add("/placements/0/settings/timeout", "/nodes/0/timeout")
    pmap.placement_kind(0, "task")
    assert pmap("/placements/0/routes/a~1b/1") == "/nodes/0/outputs/a~1b/1"
    assert pmap("/placements/0/task/routes/ok") == "/nodes/0/outputs/ok"
    assert pmap("/placements/0/settings/timeout") == "/nodes/0/timeout"
    assert pmap("/placements/0/node") == "/nodes/0/node"
    assert pmap("/deadline") == "/deadline"
    assert pmap("") == ""


def test_phase_the_field_is_not_phase_the_kind() -> None:
    pmap = PointerMap.identity({"placements": [{"kind": "phase"}, {"kind": "wait"}]})
    assert pmap("/placements/0/phase") == "/placements/0/phase"
    assert pmap("/placements/0/phase/node") == "/placements/0/node"
    assert pmap("/placements/1/wait") == "/placements/1"
    assert pmap("/placements/1/wait/duration") == "/placements/1/duration"
