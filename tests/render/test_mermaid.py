"""Mermaid rendering: shapes per kind, labels, edges, settings on labels, escaping, ids."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.model import Flow
from flowtide.render import effective_settings, mermaid_id, render_mermaid
from tests.render.mermaid_graph import parse

FLOW_ID = "urn:test:flow:shapes"


def node_id(placement: str) -> str:
    return mermaid_id(f"{FLOW_ID}/node/{placement}")


def make_flow(placements: list[dict[str, Any]], **extra: Any) -> Flow:
    data: dict[str, Any] = {
        "id": FLOW_ID,
        "version": "3",
        "entrypoints": {"main": placements[0]["id"]},
        "placements": placements,
    }
    data.update(extra)
    return Flow.model_validate(data)


def every_kind() -> Flow:
    return make_flow(
        [
            {
                "id": "start",
                "kind": "task",
                "node": "urn:n:start",
                "routes": {"go": ["pause", "fan-out"]},
            },
            {"id": "pause", "kind": "wait", "duration": "PT10M", "routes": {"elapsed": "meet"}},
            {
                "id": "fan-out",
                "kind": "scatter",
                "source": "orders",
                "body": {"node": "urn:n:ship"},
                "concurrency": 4,
                "routes": {"all-success": "meet", "partial": "meet"},
            },
            {"id": "meet", "kind": "join", "mode": "first", "routes": {"success": "child"}},
            {
                "id": "child",
                "kind": "subflow",
                "flow": "urn:test:flow:child",
                "routes": {"success": "done", "error": "broken"},
            },
            {"id": "audit", "kind": "phase", "phase": "post", "node": "urn:n:audit"},
            {"id": "done", "kind": "terminal"},
            {"id": "broken", "kind": "terminal", "outcome": "failed", "name": "Broken"},
        ]
    )


def test_header_and_direction() -> None:
    text = render_mermaid(every_kind(), direction="LR")
    graph = parse(text)
    assert graph.direction == "LR"
    assert graph.comments == [f"{FLOW_ID} (v3)"]
    assert "\n  %% urn:test:flow:shapes (v3)\n" in text


def test_named_flow_header_uses_the_name() -> None:
    flow = make_flow([{"id": "end", "kind": "terminal"}], name="Checkout")
    assert parse(render_mermaid(flow)).comments == ["Checkout (v3)"]


def test_unknown_direction_is_refused() -> None:
    with pytest.raises(ValueError, match="direction"):
        render_mermaid(every_kind(), direction="sideways")


def test_one_shape_per_kind() -> None:
    graph = parse(render_mermaid(every_kind()))
    shapes = {node.id: node.shape for node in graph.nodes.values()}
    assert shapes == {
        "entry_main": "stadium",
        node_id("start"): "task",
        node_id("pause"): "wait",
        node_id("fan-out"): "scatter",
        node_id("meet"): "join",
        node_id("child"): "subflow",
        node_id("audit"): "stadium",
        node_id("done"): "terminal",
        node_id("broken"): "terminal",
    }


def test_labels_use_name_else_id_and_phase_tells_its_kind() -> None:
    graph = parse(render_mermaid(every_kind()))
    labels = graph.labels()
    assert labels[node_id("start")] == "start"
    assert labels[node_id("broken")] == "Broken"
    assert labels[node_id("audit")] == "audit (post)"
    assert labels["entry_main"] == "main"


def test_entrypoint_edge_and_phase_has_no_edges() -> None:
    graph = parse(render_mermaid(every_kind()))
    assert ("entry_main", None, node_id("start")) in graph.edges
    assert not [e for e in graph.edges if node_id("audit") in (e[0], e[2])]


def test_parallel_split_gives_one_edge_per_target() -> None:
    graph = parse(render_mermaid(every_kind()))
    go = [e for e in graph.edges if e[1] == "go"]
    assert go == [
        (node_id("start"), "go", node_id("pause")),
        (node_id("start"), "go", node_id("fan-out")),
    ]


def test_every_route_is_a_labelled_edge() -> None:
    flow = every_kind()
    graph = parse(render_mermaid(flow))
    expected = sorted(
        (node_id(p.id), output, node_id(t))
        for p in flow.placements
        for output, targets in p.route_map().items()
        for t in targets
    )
    assert sorted(e for e in graph.edges if e[0] != "entry_main") == expected


def test_kind_annotations() -> None:
    graph = parse(render_mermaid(every_kind()))
    notes = {n.id: n.notes for n in graph.nodes.values()}
    assert notes[node_id("pause")] == ["⏳ wait PT10M"]
    assert notes[node_id("meet")] == ["join: first (cancels the others)"]
    assert notes[node_id("fan-out")] == [
        "for each orders → urn:n:ship",
        "concurrency 4 · gather append",
    ]
    assert notes[node_id("child")] == ["↳ urn:test:flow:child"]
    assert notes[node_id("broken")] == ["outcome: failed"]
    assert notes[node_id("done")] == []
    assert notes[node_id("start")] == []


def test_a_scatter_fed_by_a_source_function_names_it() -> None:
    flow = make_flow(
        [
            {
                "id": "each",
                "kind": "scatter",
                "source_fn": "shop.orders:pending",
                "body": {"flow": "urn:test:flow:child"},
                "batch": {"key": "warehouse"},
                "routes": {"all-success": "e"},
            },
            {"id": "e", "kind": "terminal"},
        ]
    )
    notes = {n.id: n.notes for n in parse(render_mermaid(flow)).nodes.values()}
    assert notes[node_id("each")] == [
        "for each shop.orders:pending() → urn:test:flow:child",
        "concurrency 1 · batches by warehouse · gather append",
    ]


def test_wait_until_and_quorum_join() -> None:
    flow = make_flow(
        [
            {
                "id": "w",
                "kind": "wait",
                "until": "2026-01-01T00:00:00Z",
                "routes": {"elapsed": "j"},
            },
            {"id": "j", "kind": "join", "mode": "quorum", "quorum": 2, "routes": {"success": "e"}},
            {"id": "e", "kind": "terminal"},
        ]
    )
    notes = {n.id: n.notes for n in parse(render_mermaid(flow)).nodes.values()}
    assert notes[node_id("w")] == ["⏳ until 2026-01-01T00:00:00+00:00"]
    assert notes[node_id("j")] == ["join: quorum 2"]


def payment_flow(placement_settings: dict[str, Any] | None) -> Flow:
    task: dict[str, Any] = {
        "id": "collect-payment",
        "kind": "task",
        "node": "urn:shop:node:collect-payment",
        "routes": {"paid": "done", "declined": "collect-payment", "timeout": "done"},
    }
    if placement_settings is not None:
        task["settings"] = placement_settings
    return make_flow(
        [task, {"id": "done", "kind": "terminal"}],
        node_types=[
            {
                "id": "urn:shop:node:collect-payment",
                "outputs": ["paid", "declined"],
                "settings": {"timeout": "PT5M", "retry": {"max_attempts": 4}},
            }
        ],
    )


def test_effective_timeout_and_anchor_on_the_label() -> None:
    flow = payment_flow({"timeout": "PT10M", "timeout_anchor": "node", "release_on": ["paid"]})
    node = parse(render_mermaid(flow)).nodes[node_id("collect-payment")]
    assert node.label == "collect-payment"
    assert node.notes == [
        "⏱ PT10M · node · released on paid",
        "↻ 4 attempts · exponential from PT1S",
    ]
    assert "collect-payment<br/>⏱ PT10M · node" in render_mermaid(flow)


def test_node_type_defaults_apply_when_the_placement_sets_nothing() -> None:
    flow = payment_flow(None)
    placement = flow.placement("collect-payment")
    settings = effective_settings(flow, placement)
    assert settings is not None
    assert settings.timeout is not None
    node = parse(render_mermaid(flow)).nodes[node_id("collect-payment")]
    assert node.notes[0] == "⏱ PT5M · park"


def test_timers_on_the_label() -> None:
    flow = payment_flow(
        {
            "timers": [
                {"after": "PT1H", "output": "remind"},
                {"after": "PT4H", "output": "escalate", "interrupting": True, "anchor": "node"},
            ]
        }
    )
    node = parse(render_mermaid(flow)).nodes[node_id("collect-payment")]
    assert node.notes[1:3] == [
        "⏰ PT1H · park → remind (non-interrupting)",
        "⏰ PT4H · node → escalate (interrupting)",
    ]


def test_kinds_without_settings_have_none() -> None:
    flow = every_kind()
    assert effective_settings(flow, flow.placement("done")) is None
    assert effective_settings(flow, flow.placement("pause")) is None


def test_labels_are_escaped() -> None:
    flow = make_flow(
        [
            {
                "id": "t",
                "kind": "task",
                "node": "urn:n:t",
                "name": 'say "hi" <b>now</b> & #1 | ok\nnext',
                "routes": {'odd "output" |x|': "e"},
            },
            {"id": "e", "kind": "terminal", "name": "set direction LR %% 100%"},
        ]
    )
    text = render_mermaid(flow)
    line = next(x for x in text.splitlines() if x.strip().startswith(node_id("t") + "["))
    assert '"' not in line[line.index('["') + 2 : line.rindex('"]')]
    assert "<b>" not in text
    assert "direction LR" not in text
    assert "%% 100" not in text
    graph = parse(text)
    assert graph.labels()[node_id("t")] == 'say "hi" <b>now</b> & #1 | ok next'
    assert graph.labels()[node_id("e")] == "set direction LR %% 100%"
    assert (node_id("t"), 'odd "output" |x|', node_id("e")) in graph.edges


@pytest.mark.parametrize(
    ("iri", "expected"),
    [
        ("urn:noocodec:dag:x/node/a-b", "urn_noocodec_dag_x/node/a-b"),
        ("https://ex.com/flow#a b", "https_//ex_com/flow_a_b"),
        ("urn:x:a--b-", "urn_x_a-b_"),
        ("end", "n_end"),
        ("classify", "n_classify"),
        ("endless", "endless"),
        ("1abc", "n_1abc"),
        ("-x", "n_-x"),
        ("é", "n__"),
        ("", "n_"),
    ],
)
def test_mermaid_ids_are_safe(iri: str, expected: str) -> None:
    assert mermaid_id(iri) == expected


def test_ids_that_clash_after_sanitising_stay_distinct() -> None:
    flow = make_flow(
        [
            {"id": "urn:a:b", "kind": "task", "node": "urn:n", "routes": {"x": "urn:a_b"}},
            {"id": "urn:a_b", "kind": "terminal"},
        ]
    )
    graph = parse(render_mermaid(flow))
    assert set(graph.nodes) == {"entry_main", "urn_a_b", "urn_a_b_2"}
    assert ("urn_a_b", "x", "urn_a_b_2") in graph.edges


def test_local_ids_become_absolute_iris() -> None:
    flow = make_flow([{"id": "end", "kind": "terminal"}])
    assert set(parse(render_mermaid(flow)).nodes) == {
        "entry_main",
        "urn_test_flow_shapes/node/end",
    }


def test_output_ends_with_a_newline_and_has_no_tabs() -> None:
    text = render_mermaid(every_kind())
    assert text.endswith("\n")
    assert "\t" not in text


def test_entrypoint_labels_become_safe_ids() -> None:
    flow = make_flow(
        [{"id": "end", "kind": "terminal"}],
        entrypoints={"main": "end", "a--b c": "end", "end": "end"},
    )
    graph = parse(render_mermaid(flow))
    entries = {n.id: n.label for n in graph.nodes.values() if n.shape == "stadium"}
    assert entries == {"entry_main": "main", "entry_a-b_c": "a--b c", "entry_end": "end"}
