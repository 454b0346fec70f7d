"""Loops and reachability of a route graph, answered on demand, agree with a plain walk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowtide.model import graphs
from flowtide.model.graphs import Reachability, reach, strongly_connected

Graph = dict[str, list[str]]


@st.composite
def route_graphs(draw: st.DrawFn) -> Graph:
    size = draw(st.integers(1, 12))
    nodes = [f"p{i}" for i in range(size)]
    edges = draw(st.lists(st.tuples(st.sampled_from(nodes), st.sampled_from(nodes)), max_size=30))
    graph: Graph = {n: [] for n in nodes}
    for source, target in edges:
        graph[source].append(target)
    return graph


def walked(graph: Graph, source: str) -> set[str]:
    """What a plain walk finds from ``source`` (itself only through a loop)."""
    return reach(graph, graph.get(source, ()))


@given(route_graphs())
def test_reachability_and_loops_agree_with_a_plain_walk(graph: Graph) -> None:
    reachability = Reachability(graph)
    for a in graph:
        found = walked(graph, a)
        assert reachability.reachable_from(a) == found
        assert set(reachability[a]) == found
        assert reachability.in_loop(a) == (a in found)
        for b in graph:
            assert reachability.can_reach(a, b) == (b in found), (a, b)
            both_ways = b in found and a in walked(graph, b)
            assert reachability.same_loop(a, b) == both_ways, (a, b)
            assert (reachability.loop_of(a) == reachability.loop_of(b) is not None) == both_ways


@given(route_graphs())
def test_components_partition_the_graph_each_after_what_it_reaches(graph: Graph) -> None:
    components = strongly_connected(graph)
    assert sorted(n for c in components for n in c) == sorted(graph)
    number = {n: i for i, c in enumerate(components) for n in c}
    for source, targets in graph.items():
        for target in targets:
            assert number[target] <= number[source]


def test_a_route_to_itself_is_a_loop_and_a_plain_chain_has_none() -> None:
    reachability = Reachability({"a": ["a", "b"], "b": ["c"], "c": []})
    assert reachability.in_loop("a")
    assert reachability.same_loop("a", "a")
    assert not reachability.in_loop("b")
    assert not reachability.same_loop("b", "b")
    assert reachability.loop_of("c") is None
    assert reachability.can_reach("a", "c")
    assert not reachability.can_reach("c", "a")


def test_unknown_nodes_reach_nothing_and_are_not_keys() -> None:
    reachability = Reachability({"a": ["b"], "b": []})
    assert not reachability.can_reach("a", "nowhere")
    assert not reachability.can_reach("nowhere", "a")
    assert reachability.get("nowhere", ()) == ()
    assert "b" in reachability.get("a", ())
    assert not reachability.in_loop("nowhere")


def test_a_long_chain_needs_no_recursion_and_no_table_of_pairs() -> None:
    size = 20_000  # far beyond the recursion limit
    graph = {f"n{i}": [f"n{i + 1}"] for i in range(size)}
    reachability = Reachability(graph)
    assert len(strongly_connected(graph)) == size + 1
    assert reachability.can_reach("n0", f"n{size}")
    assert not reachability.can_reach(f"n{size}", "n0")
    assert not any(reachability.in_loop(n) for n in ("n0", "n100", f"n{size}"))


def test_answers_stay_right_when_the_kept_answers_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(graphs, "PAIRS_KEPT", 2)
    graph = {f"n{i}": [f"n{i + 1}"] for i in range(10)}
    reachability = Reachability(graph)
    for _ in range(2):
        for i in range(10):
            assert reachability.can_reach("n0", f"n{i + 1}")
            assert not reachability.can_reach(f"n{i + 1}", "n0")
