"""Run state is JSON on every store: a node that puts something else in it fails at its own
step, named, and nothing of that step is committed."""

from __future__ import annotations

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine import Lifecycle, NodeContext, Output, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import running


@node(outputs=["next"])
async def fine(ctx: NodeContext) -> str:
    ctx.state["ok"] = [1, 2]
    return "next"


@node(outputs=["next"])
async def puts_a_set(ctx: NodeContext) -> str:
    ctx.state["tags"] = {"a", "b"}
    return "next"


@node(outputs=["next"])
async def updates_with_an_object(ctx: NodeContext) -> Output:
    return Output("next", update={"when": object()})


@node(outputs=["next"], parks=True)
async def parks_with_a_set(ctx: NodeContext) -> Park:
    return Park(payload={"ids": {1, 2}})


def flow(second: NodeImplementation) -> Flow:
    return (
        FlowBuilder("urn:test:flow:json-state")
        .task("first", fine, {"next": "second"})
        .task("second", second, {"next": "end"})
        .terminal("end", "completed")
        .build()
    )


async def test_state_that_is_not_json_fails_the_node_that_made_it() -> None:
    for bad, pointer in [
        (puts_a_set, "state/tags"),
        (updates_with_an_object, "update/when"),
        (parks_with_a_set, "park payload/ids"),
    ]:
        async with running() as (engine, _clock):
            result = await engine.run(flow(bad))
            stored = await engine.store.get_state(result.run_id)
        assert result.lifecycle is Lifecycle.FAILED, bad
        (error,) = result.errors
        assert error.type == "NotJSONError" and error.placement == "second"
        assert error.message.startswith(pointer), error.message
        assert stored == {"ok": [1, 2]}  # the first node's step only
