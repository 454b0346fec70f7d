"""The seed's scatter, embedded-DAG and gather placements read as Flowtide placements."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowtide.documents import load_document, load_flow
from flowtide.documents.vocabulary import SEED_CONTEXT
from flowtide.errors import FlowValidationError
from flowtide.model import Join, JoinMode, KeyedBatches, Scatter, Subflow

FLOW = "urn:test:dag:seed"


def _iri(local: str) -> str:
    return f"{FLOW}/node/{local}"


def _doc(*middle: dict[str, Any]) -> dict[str, Any]:
    """start (a split into a and b) -> a, b -> the placements given -> end."""
    return {
        "@context": dict(SEED_CONTEXT),
        "@id": FLOW,
        "@type": "DAG",
        "name": "seed shapes",
        "version": "1",
        "entrypoints": {"main": _iri("start")},
        "nodes": [
            {
                "@id": _iri("start"),
                "@type": "SingleNode",
                "name": "start",
                "node": "urn:test:node:start",
                "outputs": {"left": _iri("a"), "right": _iri("b")},
            },
            {
                "@id": _iri("a"),
                "@type": "SingleNode",
                "name": "a",
                "node": "urn:test:node:a",
                "outputs": {"done": _iri("middle")},
            },
            {
                "@id": _iri("b"),
                "@type": "SingleNode",
                "name": "b",
                "node": "urn:test:node:b",
                "outputs": {"done": _iri("middle")},
            },
            *middle,
            {"@id": _iri("end"), "@type": "TerminalNode", "name": "end", "outcome": "completed"},
        ],
    }


def _gather(policy: dict[str, Any] | None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "@id": _iri("middle"),
        "@type": "GatherNode",
        "name": "middle",
        "sources": {_iri("a"): {}, _iri("b"): {}},
        "outputs": {"success": _iri("end"), "error": _iri("end"), "empty": _iri("end")},
    }
    if policy is not None:
        node["policy"] = policy
    return node


@pytest.mark.parametrize(
    ("policy", "mode", "quorum"),
    [
        (None, JoinMode.ALL, None),
        ({"mode": "all"}, JoinMode.ALL, None),
        ({"mode": "any"}, JoinMode.FIRST, None),
        ({"mode": "quorum", "quorum": 2}, JoinMode.QUORUM, 2),
    ],
)
def test_gather_node_is_a_join(
    policy: dict[str, Any] | None, mode: JoinMode, quorum: int | None
) -> None:
    loaded = load_document(_doc(_gather(policy)))
    join = loaded.flow.placement("middle")
    assert isinstance(join, Join)
    assert (join.mode, join.quorum) == (mode, quorum)
    assert any(w.pointer == "/nodes/3/sources" for w in loaded.warnings)


def test_gather_policy_errors_point_into_the_policy() -> None:
    with pytest.raises(FlowValidationError) as caught:
        load_flow(_doc(_gather({"mode": "most"})))
    assert "/nodes/3/policy/mode" in {p.pointer for p in caught.value.errors}


def _scatter(**extra: Any) -> dict[str, Any]:
    return {
        "@id": _iri("middle"),
        "@type": "ScatterNode",
        "name": "middle",
        "source": "items",
        "itemKey": "currentItem",
        "body": {"node": "urn:test:node:item"},
        "outputs": {
            "all-success": _iri("end"),
            "partial": _iri("end"),
            "all-error": _iri("end"),
            "empty": _iri("end"),
        },
        **extra,
    }


def test_scatter_with_reservoir() -> None:
    node = _scatter(
        execution={
            "mode": "reservoir",
            "concurrency": 3,
            "reservoir": {"keyField": "tenant", "capacity": 50, "idleMs": 250},
        },
        stateMapping={"input": {"locale": "request.locale"}},
        reducer="aggregate",
    )
    loaded = load_document(_doc(node))
    scatter = loaded.flow.placement("middle")
    assert isinstance(scatter, Scatter)
    assert scatter.item_key == "currentItem"
    assert scatter.concurrency == 3
    assert scatter.batch == KeyedBatches(key="tenant", size=50, idle=timedelta(milliseconds=250))
    assert scatter.input == {"locale": "request.locale"}
    assert not [w for w in loaded.warnings if w.pointer.startswith("/nodes/3/")]


def test_scatter_item_mode_with_throttle() -> None:
    node = _scatter(execution={"mode": "item", "concurrency": 8, "throttle": 2.5})
    scatter = load_flow(_doc(node)).placement("middle")
    assert isinstance(scatter, Scatter)
    assert (scatter.concurrency, scatter.throttle, scatter.batch) == (8, 2.5, None)


@pytest.mark.parametrize(
    ("extra", "pointer"),
    [
        ({"execution": {"throttle": {"concurrencyLimit": 2}}}, "/nodes/3/execution/throttle"),
        ({"execution": {"mode": "swarm"}}, "/nodes/3/execution/mode"),
        ({"execution": {"mode": "reservoir"}}, "/nodes/3/execution/mode"),
        (
            {"execution": {"reservoir": {"keyField": "k", "size": 3}}},
            "/nodes/3/execution/reservoir/size",
        ),
        ({"body": {"dag": {"from": "item", "path": "flow"}}}, "/nodes/3/body/dag"),
        ({"body": "urn:test:node:item"}, "/nodes/3/body"),
        ({"stateMapping": {"input": {}, "output": {"x": "y"}}}, "/nodes/3/stateMapping/output"),
    ],
)
def test_scatter_shape_errors(extra: dict[str, Any], pointer: str) -> None:
    with pytest.raises(FlowValidationError) as caught:
        load_flow(_doc(_scatter(**extra)))
    assert pointer in {p.pointer for p in caught.value.errors}


def test_seed_features_flowtide_lacks_are_warnings() -> None:
    node = _scatter(reducer="any-success", container="gpu")
    loaded = load_document(_doc(node))
    assert {w.pointer for w in loaded.warnings} >= {"/nodes/3/reducer", "/nodes/3/container"}


def test_embedded_dag_is_a_subflow() -> None:
    node = {
        "@id": _iri("middle"),
        "@type": "EmbeddedDAGNode",
        "name": "middle",
        "dag": FLOW,
        "stateMapping": {"input": {"n": "count"}, "output": {"result": "child.result"}},
        "outputs": {"success": _iri("end"), "error": _iri("end")},
    }
    subflow = load_flow(_doc(node)).placement("middle")
    assert isinstance(subflow, Subflow)
    assert subflow.flow == FLOW
    assert subflow.input == {"n": "count"}
    assert subflow.output == {"result": "child.result"}
