"""The support-dispatcher fixture renders to the same graph as its reference Mermaid chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtide.render import render_mermaid
from tests.render.fixture_flow import (
    FIXTURE_JSONLD,
    FIXTURE_MMD,
    SHARED_FIXTURES,
    load_support_dispatcher,
    support_dispatcher_by_hand,
)
from tests.render.mermaid_graph import parse


def test_same_nodes_and_labelled_edges_as_the_reference() -> None:
    ours = parse(render_mermaid(load_support_dispatcher()))
    reference = parse(FIXTURE_MMD.read_text())
    assert ours.labels() == reference.labels()
    assert ours.edge_set() == reference.edge_set()
    assert {n.id: n.shape for n in ours.nodes.values()} == {
        n.id: n.shape for n in reference.nodes.values()
    }
    assert ours.comments == reference.comments == ["dag:support-dispatcher (v1)"]
    assert ours.direction == reference.direction == "TB"


def test_reference_reader_sees_the_whole_reference() -> None:
    reference = parse(FIXTURE_MMD.read_text())
    assert len(reference.nodes) == 8  # 7 placements and the entrypoint
    assert len(reference.edges) == 9
    assert ("entry_main", None, "urn_noocodec_dag_support-dispatcher/node/classify-message") in (
        reference.edges
    )


@pytest.mark.parametrize(
    ("ours", "name"),
    [(FIXTURE_JSONLD, "support-dispatcher.jsonld"), (FIXTURE_MMD, "support-dispatcher.mmd")],
)
def test_copies_match_the_shared_fixtures(ours: Path, name: str) -> None:
    shared = SHARED_FIXTURES / name
    if not shared.exists():
        pytest.skip("the shared fixtures are not next to this checkout")
    assert ours.read_bytes() == shared.read_bytes()


def test_loader_and_hand_reading_draw_the_same_chart() -> None:
    assert render_mermaid(load_support_dispatcher()) == render_mermaid(support_dispatcher_by_hand())


def test_byte_for_byte_like_the_reference() -> None:
    # Not required (the graphs are what must agree), but the fixture has no settings to show,
    # so the chart comes out identical.
    assert render_mermaid(load_support_dispatcher()) == FIXTURE_MMD.read_text()
