"""A document means what its IRIs say, whatever its ``@context`` calls them."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from flowtide import documents
from flowtide.documents import (
    FLOWTIDE_CONTEXT,
    FLOWTIDE_CONTEXT_IRI,
    load_document,
    load_flow,
    to_jsonld,
)
from flowtide.documents.contexts import ActiveContext
from flowtide.documents.vocabulary import FLOWTIDE, SEED, SEED_CONTEXT_IRIS
from flowtide.errors import FlowValidationError
from tests.documents.samples import fixture_document, rich_flow

FLOW_ID = "urn:noocodec:dag:support-dispatcher"
NODE_PREFIX = f"{FLOW_ID}/node/"


def _rename(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every object key in ``names`` renamed (map-like values left alone)."""
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, inner in value.items():
        new = names.get(str(key), str(key))
        out[new] = inner if key in ("outputs", "entrypoints") else _rename(inner, names)
    return out


def renamed_fixture() -> dict[str, Any]:
    """The fixture under another context: other term names, aliases, a prefix and CURIEs."""
    doc = fixture_document()
    names = {
        "outputs": "links",
        "nodes": "steps",
        "node": "d:node",
        "name": "label",
        "@id": "id",
        "@type": "kind",
        "entrypoints": "starts",
    }
    body: dict[str, Any] = _rename({k: v for k, v in doc.items() if k != "@context"}, names)
    type_names = {"SingleNode": "step", "PhaseNode": "d:PhaseNode", "TerminalNode": "end"}
    for node in body["steps"]:
        node["kind"] = type_names[node["kind"]]
        node["id"] = node["id"].replace(NODE_PREFIX, "n:")
        if "d:node" in node:
            node["d:node"] = node["d:node"].replace("urn:noocodec:node:", "impl:")
        if "links" in node:
            node["links"] = {k: t.replace(NODE_PREFIX, "n:") for k, t in node["links"].items()}
    body["kind"] = "Dag"
    body["starts"] = {k: t.replace(NODE_PREFIX, "n:") for k, t in body["starts"].items()}
    body["@context"] = {
        "@version": 1.1,
        "id": "@id",
        "kind": "@type",
        "d": SEED,
        "n": NODE_PREFIX,
        "impl": "urn:noocodec:node:",
        "label": "d:name",
        "version": {"@id": "d:version"},
        "starts": {"@id": "d:entrypoints", "@container": "@index"},
        "steps": {"@id": "d:nodes", "@container": "@set"},
        "links": f"{SEED}outputs",
        "phase": "d:phase",
        "outcome": "d:outcome",
        "Dag": "d:DAG",
        "step": "d:SingleNode",
        "end": {"@id": "d:TerminalNode"},
    }
    return body


def test_renamed_terms_mean_the_same_flow() -> None:
    original = load_flow(fixture_document())
    renamed = renamed_fixture()
    assert "outputs" not in json.dumps(renamed["steps"])
    assert load_flow(renamed) == original


def test_vocab_stands_in_for_undefined_terms() -> None:
    doc = fixture_document()
    doc["@context"] = {"@vocab": SEED}
    assert load_flow(doc) == load_flow(fixture_document())


def test_context_as_a_list_of_parts() -> None:
    doc = fixture_document()
    doc["@context"] = [{"@vocab": "urn:nothing:"}, doc["@context"], {"outputs": f"{SEED}outputs"}]
    assert load_flow(doc) == load_flow(fixture_document())


def test_term_names_alone_mean_nothing() -> None:
    """The seed's spelling under other IRIs is not a flow: dispatch is on IRIs."""
    doc = fixture_document()
    doc["@context"] = {"@vocab": "urn:other:vocab#"}
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    assert any(p.pointer == "/@type" for p in caught.value.errors)


def test_placement_with_its_own_context() -> None:
    doc = fixture_document()
    node = doc["nodes"][1]
    node["@context"] = {"routes": f"{SEED}outputs"}
    node["routes"] = node.pop("outputs")
    assert load_flow(doc) == load_flow(fixture_document())


def test_term_mapped_to_null_is_ignored() -> None:
    doc = fixture_document()
    doc["@context"]["comment"] = None
    doc["nodes"][1]["comment"] = "a note for people"
    assert load_flow(doc) == load_flow(fixture_document())


def test_undefined_term_is_an_error_at_its_key() -> None:
    doc = fixture_document()
    doc["nodes"][2]["timout"] = "PT5S"
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    (problem,) = caught.value.errors
    assert problem.pointer == "/nodes/2/timout"
    assert "timout" in problem.message


def test_foreign_iri_is_a_warning() -> None:
    doc = fixture_document()
    doc["@context"]["note"] = "https://example.org/note"
    doc["nodes"][1]["note"] = "kept out"
    loaded = load_document(doc)
    assert loaded.flow == load_flow(fixture_document())
    assert any(w.pointer == "/nodes/1/note" for w in loaded.warnings)


def test_flowtide_terms_under_other_names() -> None:
    flow = rich_flow()
    doc = to_jsonld(flow)
    doc["@context"] = {**doc["@context"], "ft": FLOWTIDE, "patience": "ft:timeout"}
    del doc["@context"]["timeout"]
    for node in doc["nodes"]:
        if "timeout" in node:
            node["patience"] = node.pop("timeout")
    charge = doc["nodes"][1]
    charge["ft:timeout_anchor"] = charge.pop("timeout_anchor")
    assert load_flow(doc) == flow


def test_two_keys_with_one_meaning_are_an_error() -> None:
    doc = fixture_document()
    doc["@context"]["links"] = {"@id": f"{SEED}outputs"}
    doc["nodes"][1]["links"] = {"routine": f"{FLOW_ID}/node/decline"}
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    assert any(p.pointer == "/nodes/1/links" for p in caught.value.errors)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a flow document was about to reach the network")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.usefixtures("no_network")
def test_remote_context_is_refused_without_fetching() -> None:
    doc = fixture_document()
    doc["@context"] = "https://example.org/contexts/dag.jsonld"
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    (problem,) = caught.value.errors
    assert problem.pointer == "/@context"
    assert "https://example.org/contexts/dag.jsonld" in problem.message
    assert "never fetched" in problem.message


@pytest.mark.usefixtures("no_network")
def test_remote_context_inside_a_placement_is_refused() -> None:
    doc = fixture_document()
    doc["nodes"][3]["@context"] = ["https://example.org/more.jsonld"]
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    assert [p.pointer for p in caught.value.errors] == ["/nodes/3/@context"]


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("iri", [FLOWTIDE_CONTEXT_IRI, *SEED_CONTEXT_IRIS])
def test_known_context_iris_are_served_locally(iri: str) -> None:
    doc = fixture_document()
    doc["@context"] = iri
    assert load_flow(doc) == load_flow(fixture_document())


def test_flowtide_context_iri_reads_a_dumped_flow() -> None:
    flow = rich_flow()
    doc = to_jsonld(flow)
    doc["@context"] = [FLOWTIDE_CONTEXT_IRI]
    assert load_flow(doc) == flow


@pytest.mark.parametrize(
    "context",
    [
        {"name": {"@id": "@id"}, "x": {"@id": 3}},
        {"@version": 2},
        42,
        {"a": {"@reverse": "@id"}},
    ],
)
def test_invalid_context_is_a_located_problem(context: Any) -> None:
    doc = fixture_document()
    doc["@context"] = context
    with pytest.raises(FlowValidationError) as caught:
        load_flow(doc)
    assert [p.pointer for p in caught.value.errors] == ["/@context"]
    assert "@context" in caught.value.errors[0].message


def test_curie_node_references_expand_and_module_references_stay() -> None:
    doc = fixture_document()
    doc["@context"]["nodes_ns"] = "urn:noocodec:node:"
    doc["nodes"][1]["node"] = "nodes_ns:classify-message"
    doc["nodes"][2]["node"] = "tests.documents.nodes_for_resolve:decorated"
    flow = load_flow(copy.deepcopy(doc))
    assert flow.placement("classify-message").node == "urn:noocodec:node:classify-message"  # type: ignore[union-attr]
    assert flow.placement("ai-compose").node == "tests.documents.nodes_for_resolve:decorated"  # type: ignore[union-attr]


def test_placement_iris_outside_the_flow_stay_whole() -> None:
    doc = fixture_document()
    doc["nodes"][6]["@id"] = "urn:elsewhere:the-end"
    for node in doc["nodes"]:
        for output, target in node.get("outputs", {}).items():
            if target.endswith("/node/end"):
                node["outputs"][output] = "urn:elsewhere:the-end"
    flow = load_flow(doc)
    assert flow.has_placement("urn:elsewhere:the-end")
    assert flow.placement("decline").routes == {"declined": ("urn:elsewhere:the-end",)}  # type: ignore[union-attr]


def test_shipped_context_file_is_the_canonical_context() -> None:
    shipped = Path(documents.__file__).with_name("context.jsonld")
    assert json.loads(shipped.read_text(encoding="utf-8")) == {"@context": FLOWTIDE_CONTEXT}


def test_other_sources_are_refused_cleanly() -> None:
    with pytest.raises(FlowValidationError, match="must be an object"):
        load_flow([fixture_document()])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "vocab", "expected"),
    [
        ("@id", True, "@id"),  # a keyword stays
        ("@idx", True, None),  # looks like a keyword, is not one: ignored
        ("x", True, "https://ex.org/ns#x"),  # a term
        ("x", False, "https://ex.org/base/x"),  # not as a term outside the vocabulary
        ("gone", True, None),  # a term mapped to null
        ("ex:y", True, "https://ex.org/ns#y"),  # a compact IRI
        ("_:b1", True, "_:b1"),  # a blank node
        ("urn:a:b", False, "urn:a:b"),  # an absolute IRI
        ("other", True, "urn:v:other"),  # the vocabulary
        ("../up", False, "https://ex.org/up"),  # relative to @base
    ],
)
def test_keys_and_values_expand_as_json_ld_says(
    value: str, vocab: bool, expected: str | None
) -> None:
    context = ActiveContext.initial().extend(
        {
            "@base": "https://ex.org/base/",
            "@vocab": "urn:v:",
            "ex": "https://ex.org/ns#",
            "x": {"@id": "ex:x"},
            "gone": None,
        },
        "/@context",
    )
    assert (context.key(value) if vocab else context.iri(value)) == expected
