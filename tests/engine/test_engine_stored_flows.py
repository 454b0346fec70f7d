"""Flows by id: an engine asked for a flow id it has no flow registered under starts the latest
version stored under that id, and a subflow naming a flow id does the same."""

from __future__ import annotations

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, UnknownFlowError
from flowtide.engine.flows.stored_flows import stored_flow
from flowtide.model import Flow
from flowtide.store import Store
from tests.engine.engine_helpers import at, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

FLOW = "urn:test:flow:stored"
CHILD = "urn:test:flow:stored-child"


@node(outputs=["done"])
async def note_version(ctx: NodeContext) -> str:
    ctx.state["seen"] = [*ctx.state.get("seen", []), ctx.state.get("mark")]
    return "done"


def version(number: str, mark: str, flow_id: str = FLOW) -> Flow:
    return (
        FlowBuilder(flow_id, version=number)
        .task("work", note_version, {"done": "end"}, name=mark)
        .terminal("end")
        .build()
    )


def parent(number: str) -> Flow:
    return (
        FlowBuilder(FLOW, version=number)
        .subflow("sub", version("0", "child", CHILD), {"success": "end"})
        .terminal("end")
        .build()
    )


async def keep(store: Store, flow: Flow, seconds: float) -> None:
    await store.put_flow(stored_flow(flow), stored_at=at(seconds))


async def test_a_flow_id_starts_the_latest_stored_version() -> None:
    async with running() as (engine, _):
        with pytest.raises(UnknownFlowError):
            await engine.start(FLOW)
        await keep(engine.store, version("1", "one"), 1)
        first = await engine.run(FLOW, {"mark": 1})
        assert first.lifecycle == Lifecycle.COMPLETED
        assert (await engine.store.get_run(first.run_id)).flow_version == "1"
        # Stored later: the next start by id takes it, in the same engine.
        await keep(engine.store, version("2", "two"), 2)
        second = await engine.run(FLOW, {"mark": 2})
        assert (await engine.store.get_run(second.run_id)).flow_version == "2"
        assert (await engine.learn_flow(FLOW)).version == "2"
        versions = await engine.store.flow_versions(FLOW)
        assert [(v.version, v.runs, v.latest) for v in versions] == [
            ("1", 1, False),
            ("2", 1, True),
        ]


async def test_a_registered_flow_comes_before_the_stored_ones() -> None:
    async with running(flows=[version("7", "code")]) as (engine, _):
        await keep(engine.store, version("8", "stored"), 1)
        result = await engine.run(FLOW)
        assert (await engine.store.get_run(result.run_id)).flow_version == "7"
        assert (await engine.learn_flow(FLOW)).version == "7"


async def test_a_client_starts_a_stored_flow_by_id_and_a_worker_runs_it() -> None:
    async with running() as (worker, clock):
        await keep(worker.store, version("3", "three"), 1)
        async with running(clock=clock, store=worker.store, executes=False) as (client, _):
            handle = await client.start(FLOW, {"mark": 3})
            assert handle.run_id not in client.held_runs()
        result = await worker.wait(handle.run_id)
        assert result.lifecycle == Lifecycle.COMPLETED
        assert result.state["seen"] == [3]


async def test_a_subflow_runs_the_stored_version_of_the_flow_it_names() -> None:
    async with running() as (engine, _):
        await keep(engine.store, version("1", "child", CHILD), 1)
        await keep(engine.store, parent("1"), 2)
        result = await engine.run(FLOW, {"mark": "x"})
        assert result.lifecycle == Lifecycle.COMPLETED
        # The parent recorded the child's stored document when it started.
        run = await engine.store.get_run(result.run_id)
        assert run.options["flows"] == {CHILD: stored_flow(version("1", "child", CHILD)).digest}


async def test_a_registered_parent_runs_a_child_that_is_only_stored() -> None:
    async with running(flows=[parent("5")]) as (engine, _):
        await keep(engine.store, version("1", "child", CHILD), 1)
        result = await engine.run(FLOW, {"mark": "y"})
        assert result.lifecycle == Lifecycle.COMPLETED
        children = [r for r in await engine.store.list_runs() if r.flow_id == CHILD]
        assert [(r.flow_version, r.lifecycle) for r in children] == [("1", "completed")]
