"""Load -> dump -> load gives an equal flow, in every format and across formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyld import jsonld

from flowtide.documents import Format, dump_flow, load_document, load_flow, to_jsonld
from flowtide.documents.contexts import RemoteContextRefused
from flowtide.model import Flow
from flowtide.validation import check_flow
from tests.documents.samples import SUPPORT_DISPATCHER, example_flows, rich_flow
from tests.strategies import flows

FORMATS = ("jsonld", "json", "yaml")
_FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _again(flow: Flow, fmt: str) -> Flow:
    return load_flow(dump_flow(flow, fmt), format=fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_fixture_round_trips(fmt: str) -> None:
    flow = load_flow(SUPPORT_DISPATCHER)
    assert _again(flow, fmt) == flow


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_kind_round_trips(fmt: str) -> None:
    flow = rich_flow()
    assert _again(flow, fmt) == flow
    assert _again(_again(flow, fmt), fmt) == flow


def test_dumps_are_stable() -> None:
    flow = rich_flow()
    for fmt in FORMATS:
        text = dump_flow(flow, fmt)
        assert dump_flow(load_flow(text, format=fmt), fmt) == text


def test_dump_shapes() -> None:
    flow = rich_flow()
    native = json.loads(dump_flow(flow, "json"))
    assert "@context" not in native
    assert native == flow.to_data()
    assert yaml.safe_load(dump_flow(flow, "yaml")) == native
    doc = json.loads(dump_flow(flow, Format.JSONLD))
    assert doc == to_jsonld(flow)
    assert doc["@type"] == "DAG"
    assert {n["@type"] for n in doc["nodes"]} == {
        "PhaseNode",
        "SingleNode",
        "Wait",
        "ScatterNode",
        "Join",
        "EmbeddedDAGNode",
        "TerminalNode",
    }
    assert doc["nodes"][1]["outputs"]["paid"] == [
        "urn:test:flow:rich/node/fan-out",
        "urn:test:flow:rich/node/cool-down",
    ]
    assert doc["nodes"][-1]["@id"] == "urn:elsewhere:audit"


def test_sub_millisecond_idle_survives_the_reservoir() -> None:
    data = rich_flow().to_data()
    data["placements"][4]["batch"]["idle"] = "PT0.0015S"
    flow = Flow.model_validate(data)
    reservoir = to_jsonld(flow)["nodes"][4]["execution"]["reservoir"]
    assert reservoir == {"keyField": "warehouse", "capacity": 20, "idle": "PT0.0015S"}
    assert _again(flow, "jsonld") == flow


def _fed_by_a_function() -> Flow:
    data = rich_flow().to_data()
    scatter = data["placements"][4]
    del scatter["source"]
    scatter["source_fn"] = "shop.orders:pending_lines"
    return Flow.model_validate(data)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_scatter_source_function_round_trips(fmt: str) -> None:
    flow = _fed_by_a_function()
    assert _again(flow, fmt) == flow
    assert _again(flow, fmt).placement("fan-out") == flow.placement("fan-out")


def test_a_scatter_source_function_is_the_flowtide_term_source_fn() -> None:
    node = to_jsonld(_fed_by_a_function())["nodes"][4]
    assert node["sourceFn"] == "shop.orders:pending_lines"
    assert "source" not in node
    expanded = jsonld.expand(to_jsonld(_fed_by_a_function()), {"documentLoader": _refuse})
    scatter = expanded[0]["https://noocodec.dev/ontology/dag/nodes"][4]
    assert scatter["https://flowtide.dev/ns#sourceFn"] == [{"@value": "shop.orders:pending_lines"}]


def test_a_source_function_under_another_term_name_means_the_same_flow() -> None:
    flow = _fed_by_a_function()
    doc = to_jsonld(flow)
    doc["@context"]["itemsFrom"] = doc["@context"].pop("sourceFn")
    doc["nodes"][4]["itemsFrom"] = doc["nodes"][4].pop("sourceFn")
    assert load_flow(doc) == flow


@pytest.mark.parametrize("path", example_flows(), ids=lambda p: p.name)
def test_examples_round_trip(path: Path) -> None:
    flow = load_document(path).flow
    for fmt in FORMATS:
        assert _again(flow, fmt) == flow


def test_strategy_draws_valid_flows() -> None:
    @_FEW
    @given(flows())
    def check(flow: Flow) -> None:
        errors = [p for p in check_flow(flow) if p.severity == "error"]
        assert not errors, errors

    check()


@_FEW
@given(flows(), st.lists(st.sampled_from(FORMATS), min_size=1, max_size=4))
def test_round_trip_across_formats(flow: Flow, chain: list[str]) -> None:
    current = flow
    for fmt in chain:
        current = _again(current, fmt)
        assert current == flow, fmt


def _refuse(url: str, options: Any = None) -> Any:
    raise RemoteContextRefused(url)


@settings(max_examples=15, deadline=None)
@given(flows())
def test_dumped_json_ld_expands(flow: Flow) -> None:
    expanded = jsonld.expand(to_jsonld(flow), {"documentLoader": _refuse})
    assert expanded[0]["@id"] == flow.id
    assert len(expanded[0]["https://noocodec.dev/ontology/dag/nodes"]) == len(flow.placements)
