"""The bundled examples: each loads, validates cleanly, renders, and means what it says."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from flowtide.cli.examples import bundled_examples, bundled_scripts, examples_dir, is_script
from flowtide.documents import load_document, load_flow, load_flows
from flowtide.model import Flow, Join, JoinMode, Task, TimeoutAnchor, Wait
from flowtide.render import effective_settings, render_mermaid
from tests.render.mermaid_graph import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOCUMENTS = sorted(
    p for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".jsonld") and not is_script(p)
)
SCRIPTS = sorted(p for p in EXAMPLES.iterdir() if is_script(p))
# support-dispatcher.jsonld declares no node types, so its outputs go unchecked.
UNTYPED = {"support-dispatcher.jsonld"}


def test_the_examples_are_there() -> None:
    assert {p.name for p in DOCUMENTS} == {
        "checkout-node-anchor.yaml",
        "checkout-wait-branch.yaml",
        "escalation-ladder.yaml",
        "support-dispatcher.jsonld",
        "support-dispatcher-timeouts.jsonld",
    }


def test_bundled_examples_are_found_from_a_checkout() -> None:
    assert examples_dir() is not None
    assert [p.name for p in bundled_examples()] == [p.name for p in DOCUMENTS]


def test_the_simulation_scripts_are_bundled_apart_from_the_flows() -> None:
    assert [p.name for p in SCRIPTS] == [
        "checkout-node-anchor.simulate.yaml",
        "checkout-wait-branch.simulate.yaml",
    ]
    assert bundled_scripts() == SCRIPTS
    for script in SCRIPTS:
        assert (EXAMPLES / script.name.replace(".simulate", "")).exists()


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_example_loads_and_renders(path: Path) -> None:
    doc = load_document(path)
    if path.name in UNTYPED:
        assert doc.warnings
    else:
        assert doc.warnings == ()
    graph = parse(render_mermaid(doc.flow))
    assert len(graph.nodes) == len(doc.flow.placements) + len(doc.flow.entrypoints)
    routes = sum(len(t) for p in doc.flow.placements for t in p.route_map().values())
    assert len(graph.edges) == routes + len(doc.flow.entrypoints)


def test_examples_load_together() -> None:
    assert len(load_flows(DOCUMENTS)) == len(DOCUMENTS)


def task(flow: Flow, placement_id: str) -> Task:
    placement = flow.placement(placement_id)
    assert isinstance(placement, Task)
    return placement


def test_checkout_node_anchor() -> None:
    flow = load_flow(EXAMPLES / "checkout-node-anchor.yaml")
    collect = task(flow, "collect-payment")
    settings = effective_settings(flow, collect)
    assert settings is not None
    assert settings.timeout == timedelta(minutes=10)
    assert settings.anchor is TimeoutAnchor.NODE
    assert settings.release_on == ("paid",)
    assert collect.routes["timeout"] == ("expired",)
    assert task(flow, "offer-retry").routes["retry"] == ("collect-payment",)
    assert {t.id: t.outcome for t in flow.terminals()} == {
        "paid": "paid",
        "expired": "expired",
        "abandoned": "abandoned",
    }
    assert "collect-payment<br/>⏱ PT10M · node" in render_mermaid(flow)


def test_checkout_wait_branch() -> None:
    flow = load_flow(EXAMPLES / "checkout-wait-branch.yaml")
    split = task(flow, "open-payment").routes["opened"]
    assert split == ("collect-payment", "payment-window")
    window = flow.placement("payment-window")
    assert isinstance(window, Wait)
    assert window.duration == timedelta(minutes=10)
    join = flow.placement("first-to-finish")
    assert isinstance(join, Join)
    assert join.mode is JoinMode.FIRST
    # Every way out of the race passes the join, then settle-payment decides.
    assert task(flow, "collect-payment").routes["paid"] == ("first-to-finish",)
    assert task(flow, "offer-retry").routes["give-up"] == ("first-to-finish",)
    assert window.routes["elapsed"] == ("first-to-finish",)
    assert join.routes["success"] == ("settle-payment",)
    assert set(task(flow, "settle-payment").routes) == {"paid", "expired", "abandoned"}
    # No timeout anywhere: the wait branch is the budget.
    for placement in flow.placements:
        settings = effective_settings(flow, placement)
        assert settings is None or settings.timeout is None
    assert flow.description is not None
    assert "payment_status" in flow.description


def test_escalation_ladder() -> None:
    flow = load_flow(EXAMPLES / "escalation-ladder.yaml")
    approval = task(flow, "await-approval")
    settings = effective_settings(flow, approval)
    assert settings is not None
    assert settings.timeout == timedelta(hours=12)
    assert settings.anchor is TimeoutAnchor.NODE
    timers = {t.output: t for t in settings.timers or ()}
    assert timers["remind"].after == timedelta(hours=1)
    assert not timers["remind"].interrupting
    assert timers["escalate"].after == timedelta(hours=4)
    assert timers["escalate"].interrupting
    assert approval.routes["remind"] == ("send-reminder",)
    assert task(flow, "send-reminder").routes["sent"] == ("reminder-sent",)
    assert approval.routes["escalate"] == ("escalate",)
    assert approval.routes["timeout"] == ("expired",)
    node = parse(render_mermaid(flow)).nodes[
        "urn_flowtide_example_escalation-ladder/node/await-approval"
    ]
    assert node.notes == [
        "⏱ PT12H · node · released on approved, rejected",
        "⏰ PT1H · park → remind (non-interrupting)",
        "⏰ PT4H · park → escalate (interrupting)",
    ]


def test_support_dispatcher_timeouts() -> None:
    plain = load_flow(EXAMPLES / "support-dispatcher.jsonld")
    timed = load_flow(EXAMPLES / "support-dispatcher-timeouts.jsonld")
    assert [p.kind for p in timed.placements] == [p.kind for p in plain.placements]
    for placement in timed.placements:
        settings = effective_settings(timed, placement)
        timeout = settings.timeout if settings is not None else None
        if placement.id.endswith(("classify-message", "ai-compose")):
            assert timeout == timedelta(seconds=60)
        else:
            assert timeout is None


def test_the_wheel_ships_the_examples_inside_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    force = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force == {"examples": "flowtide/examples"}


def test_installed_examples_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "flowtide"
    (package / "examples").mkdir(parents=True)
    (package / "examples" / "only.yaml").write_text("id: x\n")
    (package / "examples" / "notes.txt").write_text("not a flow\n")
    (package / "examples" / "only.simulate.yaml").write_text("signals: []\n")
    monkeypatch.setattr("flowtide.cli.examples.files", lambda name: package)
    assert examples_dir() == package / "examples"
    assert [p.name for p in bundled_examples()] == ["only.yaml"]
    assert [p.name for p in bundled_scripts()] == ["only.simulate.yaml"]
