"""What an engine works out once per flow document: its plan, and the flows it runs (recorded
on every run it starts), worked out again only when a registered flow changes."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Park
from flowtide.engine.flows.catalog import FlowCatalog
from flowtide.engine.flows.plan import FlowPlan
from flowtide.model import Flow
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import running

PARENT = "urn:test:flow:catalog-parent"
CHILD = "urn:test:flow:catalog-child"


@node(outputs=["done"])
async def finish(ctx: NodeContext) -> str:
    return "done"


@node(outputs=["answered"], parks=True)
async def ask(ctx: NodeContext) -> Any:
    return "answered" if ctx.signal is not None else Park(key=f"ask-{ctx.run_id}")


def child(version: str) -> Flow:
    b = FlowBuilder(CHILD, version=version).task("w", finish, {"done": "end"})
    return b.terminal("end").build()


def parent() -> Flow:
    return (
        FlowBuilder(PARENT).subflow("sub", child("1"), {"success": "end"}).terminal("end").build()
    )


def test_the_flows_a_flow_runs_are_found_again_when_one_changes() -> None:
    catalog = FlowCatalog(MemoryStore(), lambda ref: None)
    catalog.register(parent())
    catalog.register(child("1"))
    first = catalog.children(PARENT)
    assert list(first) == [CHILD]
    first[CHILD] = "changed by the caller"  # (a copy: the catalog's is untouched)
    assert catalog.children(PARENT) == {CHILD: catalog.digest(CHILD)}
    catalog.register(child("2"))
    assert catalog.children(PARENT) == {CHILD: catalog.digest(CHILD)}
    assert catalog.digest(CHILD) != first.get(CHILD)


async def test_a_flow_is_planned_once_for_all_its_runs_and_signals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    build = FlowPlan.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[FlowPlan], flow: Flow, implemented: Any) -> FlowPlan:
        built.append(flow.id)
        plan: FlowPlan = build(cls, flow, implemented)
        return plan

    monkeypatch.setattr(FlowPlan, "build", classmethod(counted))
    b = FlowBuilder("urn:test:flow:catalog-park").task("ask", ask, {"answered": "end"})
    flow = b.terminal("end").build()
    async with running(flows=[flow]) as (engine, _):
        for _ in range(3):
            parked = await engine.run(flow)
            assert parked.lifecycle == Lifecycle.PARKED
            await engine.signal(parked.run_id, key=f"ask-{parked.run_id}")
            assert (await engine.wait(parked.run_id)).lifecycle == Lifecycle.COMPLETED
    assert built == [flow.id]
