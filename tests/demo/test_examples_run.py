"""Every bundled example runs end to end with the stand-in nodes Flowtide ships, and only those."""

from __future__ import annotations

import importlib
from datetime import timedelta
from pathlib import Path

import pytest

from flowtide.authoring import NodeRegistry
from flowtide.authoring.nodes import as_node
from flowtide.cli.examples import bundled_examples
from flowtide.clock import VirtualClock
from flowtide.demo import EXAMPLE_NODES, run_approval_demo
from flowtide.demo.approval import LEVELS
from flowtide.documents import load_flow
from flowtide.documents.resolve import resolve_nodes
from flowtide.engine import Engine, Lifecycle, RefusalReason

EXAMPLES = bundled_examples()


def test_every_bundled_example_names_its_node_module() -> None:
    assert sorted(EXAMPLE_NODES) == [p.name for p in EXAMPLES]
    assert all(module.startswith("flowtide.demo.") for module in EXAMPLE_NODES.values())


def shipped_registry(module_name: str) -> NodeRegistry:
    """What ``flowtide run --nodes MODULE`` registers: the module's ``NODES``."""
    module = importlib.import_module(module_name)
    registry = NodeRegistry()
    for impl in module.NODES:
        registry.register(as_node(impl))
    return registry


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
async def test_the_example_runs_to_its_end_with_the_shipped_nodes(path: Path) -> None:
    module_name = EXAMPLE_NODES[path.name]
    registry = shipped_registry(module_name)
    flow = load_flow(path, registry=registry)
    # Every node of the example is code of the shipped module, none of the tests'.
    for ref, impl in resolve_nodes(flow, registry).items():
        assert impl.fn.__module__ == module_name, ref
    clock = VirtualClock(autojump=True)
    async with Engine(clock=clock, registry=registry, flows=[flow]) as engine:
        # Nobody answers a parked node: its window (or the wait branch) ends the run.
        handle = await engine.start(flow, {"message": "Where is my order?", "modelLatency": 1})
        result = await handle.result()
    await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED, result.errors
    assert result.terminals


async def test_the_approval_demo_reminds_escalates_expires_and_refuses_a_late_approval() -> None:
    run = await run_approval_demo()
    hours = [m.after / timedelta(hours=1) for m in run.timeline]
    assert hours == [0, 1, 4, 5, 8, 9, 12, 12.5]
    assert run.result.terminals[-1] == "expired"
    assert run.result.state["reminders"] == list(LEVELS)
    assert run.late.reason is RefusalReason.EXPIRED
    assert "refused, the request expired at +12:00:00" in run.timeline[-1].what
