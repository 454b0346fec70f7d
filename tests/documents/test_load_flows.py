"""Several documents that name each other as subflows load together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowtide.documents import dump_flow, load_flow, load_flows
from flowtide.errors import FlowValidationError
from flowtide.model import Flow


def _parent(child: str) -> dict[str, Any]:
    return {
        "id": "urn:test:flow:parent",
        "entrypoints": {"main": "note"},
        "placements": [
            {
                "id": "note",
                "kind": "task",
                "node": "urn:test:node:note",
                "routes": {"done": "run-child"},
            },
            {
                "id": "run-child",
                "kind": "subflow",
                "flow": child,
                "routes": {"success": "done", "error": "failed"},
            },
            {"id": "done", "kind": "terminal"},
            {"id": "failed", "kind": "terminal", "outcome": "failed"},
        ],
    }


CHILD: dict[str, Any] = {
    "id": "urn:test:flow:child",
    "entrypoints": {"main": "wait"},
    "placements": [
        {"id": "wait", "kind": "wait", "duration": "PT1S", "routes": {"elapsed": "back"}},
        {
            "id": "back",
            "kind": "subflow",
            "flow": "urn:test:flow:parent",
            "routes": {"success": "end", "error": "end"},
        },
        {"id": "end", "kind": "terminal"},
    ],
}


def _write(tmp_path: Path) -> tuple[Path, Path]:
    parent = load_flow(_parent("urn:test:flow:child"), catalog={"urn:test:flow:child": _stub()})
    child = load_flow(CHILD, catalog={"urn:test:flow:parent": parent})
    parent_path = tmp_path / "parent.jsonld"
    child_path = tmp_path / "child.yaml"
    parent_path.write_text(dump_flow(parent, "jsonld"), encoding="utf-8")
    child_path.write_text(dump_flow(child, "yaml"), encoding="utf-8")
    return parent_path, child_path


def _stub() -> Flow:
    return Flow.model_validate(
        {
            "id": "urn:test:flow:child",
            "entrypoints": {"main": "end"},
            "placements": [{"id": "end", "kind": "terminal"}],
        }
    )


def test_documents_that_name_each_other(tmp_path: Path) -> None:
    parent_path, child_path = _write(tmp_path)
    for order in ([parent_path, child_path], [child_path, parent_path]):
        loaded = load_flows(order)
        assert set(loaded) == {"urn:test:flow:parent", "urn:test:flow:child"}
        assert loaded["urn:test:flow:child"].source == str(child_path)


def test_alone_a_subflow_reference_is_unknown(tmp_path: Path) -> None:
    parent_path, _ = _write(tmp_path)
    with pytest.raises(FlowValidationError) as caught:
        load_flows([parent_path])
    (problem,) = caught.value.errors
    assert problem.source == str(parent_path)
    assert problem.pointer == "/nodes/1/dag"
    assert "urn:test:flow:child" in problem.message


def test_every_document_reports(tmp_path: Path) -> None:
    parent_path, child_path = _write(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    again = tmp_path / "again.yaml"
    again.write_text(child_path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(FlowValidationError) as caught:
        load_flows([parent_path, child_path, broken, again])
    sources = {p.source for p in caught.value.errors}
    assert sources == {str(broken), str(again)}
    assert caught.value.warnings
    assert all(p.source == str(parent_path) for p in caught.value.warnings)
