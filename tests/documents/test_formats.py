"""Which format a document is in, and what malformed text reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from flowtide.documents import Format, dump_flow, formats, load_document, load_flow, parse_format
from flowtide.documents.formats import parse_text
from flowtide.errors import FlowValidationError
from flowtide.model import Flow
from tests.documents.samples import SUPPORT_DISPATCHER, fixture_document, rich_flow
from tests.strategies import flows


@pytest.mark.parametrize(
    ("suffix", "fmt", "expected"),
    [
        (".jsonld", "jsonld", Format.JSONLD),
        (".json", "json", Format.JSON),
        (".yaml", "yaml", Format.YAML),
        (".yml", "yaml", Format.YAML),
        (".JSON", "json", Format.JSON),
    ],
)
def test_format_by_suffix(tmp_path: Path, suffix: str, fmt: str, expected: Format) -> None:
    flow = rich_flow()
    path = tmp_path / f"flow{suffix}"
    path.write_text(dump_flow(flow, fmt), encoding="utf-8")
    loaded = load_document(path)
    assert loaded.format is expected
    assert loaded.flow == flow


def test_context_makes_json_ld_whatever_the_suffix(tmp_path: Path) -> None:
    for name in ("flow.json", "flow.yaml", "flow.txt"):
        path = tmp_path / name
        path.write_text(SUPPORT_DISPATCHER.read_text(encoding="utf-8"), encoding="utf-8")
        assert load_document(path).format is Format.JSONLD


def test_jsonld_suffix_without_context_is_native(tmp_path: Path) -> None:
    path = tmp_path / "flow.jsonld"
    path.write_text(dump_flow(rich_flow(), "json"), encoding="utf-8")
    assert load_document(path).format is Format.JSON


def test_explicit_format_wins_over_the_suffix(tmp_path: Path) -> None:
    path = tmp_path / "flow.json"
    path.write_text(dump_flow(rich_flow(), "yaml"), encoding="utf-8")
    with pytest.raises(FlowValidationError):
        load_flow(path)
    assert load_flow(path, format="yaml") == rich_flow()
    assert load_flow(str(path), format="yml") == rich_flow()


def test_text_bytes_and_mappings() -> None:
    flow = rich_flow()
    assert load_flow(dump_flow(flow, "yaml"), format="yaml") == flow
    assert load_flow(dump_flow(flow, "json").encode(), format="json") == flow
    assert load_flow(dump_flow(flow, "jsonld"), format="json") == flow
    assert load_flow(flow.to_data()) == flow
    assert load_flow(fixture_document()) == load_flow(SUPPORT_DISPATCHER)
    # Without a format, text is sniffed: JSON when it opens like JSON, else YAML.
    assert load_flow(dump_flow(flow, "yaml")) == flow
    assert load_flow(dump_flow(flow, "json")) == flow


def test_unknown_format_name() -> None:
    with pytest.raises(FlowValidationError, match="unknown document format"):
        parse_format("toml")
    assert parse_format("JSON-LD") is Format.JSONLD


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{"id": "urn:x",\n  "version": 1,,\n}', 2, 16),
        ('{"id": "urn:x"', 1, 15),
        ("", 1, 1),
    ],
)
def test_malformed_json_names_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(FlowValidationError) as caught:
        load_flow(text, format="json")
    (problem,) = caught.value.errors
    assert f"line {line}, column {column}" in problem.message
    assert problem.message.startswith("malformed JSON")


def test_malformed_yaml_names_line_and_column() -> None:
    text = "id: urn:x\nentrypoints:\n  main: a\n placements: [\n"
    with pytest.raises(FlowValidationError) as caught:
        load_flow(text, format="yaml")
    (problem,) = caught.value.errors
    assert problem.message.startswith("malformed YAML at line 4, column 2")


def test_malformed_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("id: [unclosed\n", encoding="utf-8")
    with pytest.raises(FlowValidationError) as caught:
        load_flow(path)
    (problem,) = caught.value.errors
    assert problem.source == str(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("text", "fmt", "what"),
    [("[1, 2]", "json", "a list"), ("just text", "yaml", "a scalar"), ("", "yaml", "empty")],
)
def test_a_document_must_be_an_object(text: str, fmt: str, what: str) -> None:
    with pytest.raises(FlowValidationError) as caught:
        load_flow(text, format=fmt)
    assert f"must be an object, not {what}" in caught.value.errors[0].message


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FlowValidationError) as caught:
        load_flow(missing)
    assert caught.value.errors[0].source == str(missing)
    assert "cannot read" in caught.value.errors[0].message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: Größe\n".encode("latin-1"))
    with pytest.raises(FlowValidationError, match="not UTF-8"):
        load_flow(path)


def test_yaml_keeps_tricky_words_as_text() -> None:
    data = rich_flow().to_data()
    data["placements"][1]["routes"] = {
        "yes": "fan-out",
        "no": "retry-later",
        "null": "cool-down",
        "on": "lost",
    }
    data["node_types"][0]["outputs"] = ["yes", "no", "null", "on"]
    del data["placements"][1]["settings"]
    flow = load_flow(data)
    text = dump_flow(flow, "yaml")
    assert set(yaml.safe_load(text)["placements"][1]["routes"]) == {"yes", "no", "null", "on"}
    assert load_flow(text, format="yaml") == flow


def test_structural_errors_are_flow_validation_errors() -> None:
    for bad in (
        {"id": 3, "entrypoints": [], "placements": "x"},
        {"@context": {}, "@id": 3},
        {"@context": {"@vocab": "https://noocodec.dev/ontology/dag/"}, "@type": "DAG", "nodes": 4},
        {
            "@context": {"@vocab": "https://noocodec.dev/ontology/dag/"},
            "@type": ["DAG"],
            "@id": "urn:x",
            "entrypoints": "main",
            "nodes": [3, {"@type": 5}, {"@id": "urn:x/node/a"}],
        },
    ):
        with pytest.raises(FlowValidationError) as caught:
            load_flow(json.loads(json.dumps(bad)))
        assert caught.value.errors


_LIBYAML = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML was built without libyaml")


def _no_pure_loader(text: str, source: str | None) -> object:
    raise AssertionError("PyYAML's pure-Python loader was used")


@_LIBYAML
def test_yaml_is_read_by_libyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "_parse_yaml_slowly", _no_pure_loader)
    text = dump_flow(rich_flow(), "yaml")
    assert load_flow(text, format="yaml") == rich_flow()


@_LIBYAML
def test_what_libyaml_refuses_is_told_as_pyyaml_tells_it() -> None:
    # libyaml stops at 1,000 levels with its own words; PyYAML's loader says it nests too deeply.
    text = "id: " + "[" * 1_001 + "]" * 1_001 + "\n"
    with pytest.raises(FlowValidationError) as caught:
        load_flow(text, format="yaml")
    (problem,) = caught.value.errors
    assert problem.message == "malformed YAML: the document nests too deeply"


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("id: urn:x\nentrypoints:\n  main: a\n placements: [\n", 4, 2),
        ("id: [unclosed\n", 2, 1),
        ("id: x\n  name: y\n", 2, 7),
        ("id: 'open\n", 2, 1),
        ("a: *nowhere\n", 1, 4),
    ],
)
def test_malformed_yaml_is_located_with_or_without_libyaml(
    monkeypatch: pytest.MonkeyPatch, text: str, line: int, column: int
) -> None:
    messages = []
    for loader in (formats.FAST_YAML_LOADER, None):
        monkeypatch.setattr(formats, "FAST_YAML_LOADER", loader)
        with pytest.raises(FlowValidationError) as caught:
            load_flow(text, format="yaml")
        messages.append(caught.value.errors[0].message)
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"malformed YAML at line {line}, column {column}")


class _RefusingLoader(yaml.SafeLoader):
    def get_single_data(self) -> object:
        raise yaml.YAMLError("refused")


def test_a_document_only_libyaml_refuses_still_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "FAST_YAML_LOADER", _RefusingLoader)
    text = dump_flow(rich_flow(), "yaml")
    assert load_flow(text, format="yaml") == rich_flow()


def test_a_byte_order_mark_inside_yaml_text_means_what_pyyaml_reads() -> None:
    text = "name: x\n\ufeffdescription: y\n"
    assert parse_text(text, Format.YAML) == yaml.load(text, Loader=yaml.SafeLoader)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(flows())
def test_both_yaml_loaders_read_a_dumped_flow_alike(flow: Flow) -> None:
    text = dump_flow(flow, "yaml")
    assert parse_text(text, Format.YAML) == yaml.load(text, Loader=yaml.SafeLoader)
