"""The seed's support-dispatcher document loads as it is, and dumps back to the same nodes."""

from __future__ import annotations

from typing import Any

from pyld import jsonld

from flowtide.documents import Format, load_document, load_flow, to_jsonld
from flowtide.documents.contexts import RemoteContextRefused
from flowtide.documents.vocabulary import SEED_CONTEXT
from flowtide.model import Phase, PhaseKind, Task, Terminal
from tests.documents.samples import SUPPORT_DISPATCHER, fixture_document

FLOW_ID = "urn:noocodec:dag:support-dispatcher"


def _no_network(url: str, options: Any = None) -> Any:
    raise RemoteContextRefused(url)


def test_fixture_loads_as_it_is() -> None:
    loaded = load_document(SUPPORT_DISPATCHER)
    flow = loaded.flow
    assert loaded.format is Format.JSONLD
    assert loaded.source == str(SUPPORT_DISPATCHER)
    assert flow.id == FLOW_ID
    assert flow.version == "1"
    assert flow.name == "dag:support-dispatcher"
    assert flow.entrypoints == {"main": "classify-message"}
    assert [(p.id, p.kind) for p in flow.placements] == [
        ("setup", "phase"),
        ("classify-message", "task"),
        ("ai-compose", "task"),
        ("park-for-operator", "task"),
        ("send-response", "task"),
        ("decline", "task"),
        ("end", "terminal"),
    ]


def test_fixture_routes_nodes_and_names() -> None:
    flow = load_flow(SUPPORT_DISPATCHER)
    classify = flow.placement("classify-message")
    assert isinstance(classify, Task)
    assert classify.node == "urn:noocodec:node:classify-message"
    assert classify.name == "dag:support-dispatcher/node/classify-message"
    assert classify.routes == {
        "routine": ("ai-compose",),
        "escalate": ("park-for-operator",),
        "off-topic": ("decline",),
    }
    park = flow.placement("park-for-operator")
    assert isinstance(park, Task)
    assert park.routes == {"parked": ("end",), "ready": ("send-response",)}
    (setup,) = flow.phases(PhaseKind.PRE)
    assert isinstance(setup, Phase)
    assert setup.node == "urn:noocodec:node:dispatcher-setup"
    (end,) = flow.terminals()
    assert isinstance(end, Terminal) and end.outcome == "completed"


def test_fixture_warnings_point_into_the_document() -> None:
    loaded = load_document(SUPPORT_DISPATCHER)
    assert loaded.warnings, "undeclared nodes are worth a warning"
    for warning in loaded.warnings:
        assert warning.severity == "warning"
        assert warning.source == str(SUPPORT_DISPATCHER)
        assert not warning.pointer.startswith("/placements")


def test_dumped_fixture_looks_like_the_fixture() -> None:
    original = fixture_document()
    dumped = to_jsonld(load_flow(original))
    assert {k: v for k, v in dumped.items() if k != "@context"} == {
        k: v for k, v in original.items() if k != "@context"
    }
    # The canonical context keeps every seed term at the seed's IRI.
    for term, definition in SEED_CONTEXT.items():
        if term.startswith("@"):
            continue
        assert dumped["@context"][term]["@id"] == definition["@id"]


def test_seed_context_is_the_fixtures() -> None:
    assert fixture_document()["@context"] == SEED_CONTEXT


def test_full_expansion_drops_output_labels() -> None:
    """Why the reader walks the structure: expansion keeps no output label of the seed shape."""
    expanded = jsonld.expand(fixture_document(), {"documentLoader": _no_network})
    nodes = expanded[0]["https://noocodec.dev/ontology/dag/nodes"]
    classify = next(n for n in nodes if n["@id"].endswith("/classify-message"))
    assert classify["https://noocodec.dev/ontology/dag/outputs"] == [{}]


def test_dumped_document_is_valid_json_ld() -> None:
    dumped = to_jsonld(load_flow(SUPPORT_DISPATCHER))
    expanded = jsonld.expand(dumped, {"documentLoader": _no_network})
    assert expanded[0]["@id"] == FLOW_ID
    assert expanded[0]["@type"] == ["https://noocodec.dev/ontology/dag/DAG"]
