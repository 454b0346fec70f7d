"""docs/placements.md documents every field of every placement kind, and its documents load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from flowtide.documents import load_document, load_flow
from flowtide.model import Flow
from flowtide.model.placements import PLACEMENT_KINDS, Body, Gather, KeyedBatches
from flowtide.model.settings import NodeSettings, RetryPolicy, Timer

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "placements.md").read_text()
COMMON = {"id", "kind", "name", "description"}


def section(title: str) -> str:
    """The text under ``## title``, up to the next section."""
    return DOC.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)


def fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


@pytest.mark.parametrize("kind", PLACEMENT_KINDS, ids=lambda k: k.model_fields["kind"].default)
def test_every_field_of_the_kind_is_documented_in_its_section(kind: type[BaseModel]) -> None:
    name = kind.model_fields["kind"].default
    text = section(name)
    for field in sorted(fields(kind) - COMMON):
        assert f"`{field}`" in text, f"{name}: {field}"
    assert f"kind: {name}" in text  # and it has an example


def test_the_common_fields_settings_and_nested_values_are_documented() -> None:
    common = section("Fields of every placement")
    for field in sorted(COMMON | fields(NodeSettings) | fields(Timer) | fields(RetryPolicy)):
        assert f"`{field}`" in common, field
    for field in sorted(fields(Body) | fields(Gather) | fields(KeyedBatches)):
        assert f"`{field}`" in section("scatter"), field


def test_every_example_loads_without_a_problem() -> None:
    loaded = [load_document(text, format="yaml") for text in blocks() if "flow: urn:" not in text]
    assert all(doc.warnings == () for doc in loaded)
    kinds = {p.kind for doc in loaded for p in doc.flow.placements}
    assert kinds >= {"task", "wait", "join", "scatter", "phase", "terminal"}


def test_the_subflow_example_loads_with_its_child() -> None:
    child = next(text for text in blocks() if text.startswith("id: urn:bank:flow:identity-check"))
    parent = next(text for text in blocks() if "flow: urn:bank:flow:identity-check" in text)
    child_flow = load_flow(child, format="yaml")
    doc = load_document(parent, format="yaml", catalog={child_flow.id: child_flow})
    assert doc.warnings == ()
    assert isinstance(doc.flow, Flow)
    assert doc.flow.placements[0].kind == "subflow"


def test_the_readme_links_the_placements_doc() -> None:
    assert "(docs/placements.md)" in (ROOT / "README.md").read_text()
