"""Node references resolve to registered code only: nothing is imported because a document
names it."""

from __future__ import annotations

import pytest

from flowtide.authoring import NodeRegistry, node
from flowtide.documents import load_flow, node_references, resolve_nodes
from flowtide.errors import FlowValidationError
from flowtide.model import Flow
from tests.documents import nodes_for_resolve
from tests.documents.samples import SUPPORT_DISPATCHER, rich_data


def _flow_with(*refs: str) -> Flow:
    data = rich_data()
    data["node_types"] = []
    placements = data["placements"]
    placements[0]["node"] = refs[0]
    placements[1]["node"] = refs[1] if len(refs) > 1 else refs[0]
    placements[4]["body"] = {"node": refs[2] if len(refs) > 2 else refs[0]}
    placements[-1]["node"] = refs[0]
    del placements[1]["settings"]
    return load_flow(data)


def test_nodes_resolve_by_the_ids_they_are_registered_under() -> None:
    flow = _flow_with("tests.documents.nodes_for_resolve:decorated")
    found = resolve_nodes(flow)
    assert set(found) == {"tests.documents.nodes_for_resolve:decorated"}
    assert found["tests.documents.nodes_for_resolve:decorated"] is nodes_for_resolve.decorated


def test_a_function_that_is_not_registered_is_refused() -> None:
    flow = _flow_with(
        "tests.documents.nodes_for_resolve:decorated", "tests.documents.nodes_for_resolve:plain"
    )
    with pytest.raises(FlowValidationError) as caught:
        resolve_nodes(flow)
    (problem,) = caught.value.errors
    assert problem.pointer == "/placements/1/node"
    assert "node 'tests.documents.nodes_for_resolve:plain' is not registered" in problem.message


def test_registered_iris_resolve_through_the_registry() -> None:
    @node(id="urn:test:node:setup", outputs=["done"], register=False)
    def setup(ctx: object) -> str:
        return "done"

    registry = NodeRegistry()
    registry.register(setup)
    flow = _flow_with("urn:test:node:setup", "tests.documents.nodes_for_resolve:decorated")
    found = resolve_nodes(flow, registry)
    assert found["urn:test:node:setup"] is setup
    assert found["tests.documents.nodes_for_resolve:decorated"] is nodes_for_resolve.decorated


def test_unresolved_references_name_every_placement() -> None:
    flow = _flow_with(
        "urn:test:node:nobody",
        "tests.documents.nodes_for_resolve:missing",
        "tests.documents.nodes_for_resolve:NOT_CALLABLE",
    )
    with pytest.raises(FlowValidationError) as caught:
        resolve_nodes(flow)
    located = {(p.placement, p.pointer) for p in caught.value.errors}
    assert located == {
        ("setup", "/placements/0/node"),
        ("urn:elsewhere:audit", "/placements/9/node"),
        ("charge", "/placements/1/node"),
        ("fan-out", "/placements/4/body/node"),
    }
    messages = " ".join(p.message for p in caught.value.errors)
    assert "urn:test:node:nobody" in messages and "missing" in messages
    assert "NOT_CALLABLE" in messages


@pytest.mark.parametrize(
    "ref", ["no_such_module_for_flowtide:run", "os:system", "builtins:exec", "urn:shop:pay"]
)
def test_nothing_is_imported_for_a_reference(ref: str) -> None:
    flow = _flow_with(ref)
    with pytest.raises(FlowValidationError) as caught:
        resolve_nodes(flow)
    message = str(caught.value)
    assert f"node {ref!r} is not registered here: a --nodes module must register it" in message
    assert "cannot import" not in message


def test_references_of_the_fixture() -> None:
    refs = node_references(load_flow(SUPPORT_DISPATCHER))
    assert refs["urn:noocodec:node:dispatcher-setup"] == [(0, "node")]
    assert len(refs) == 6
