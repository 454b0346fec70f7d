"""What a run keeps is what its store keeps, on every store: a value a node writes comes back as
the store gives it, whether or not the run was rebuilt from the store since."""

from __future__ import annotations

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Output, Park
from flowtide.model import Flow
from tests.engine.engine_helpers import running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@node(outputs=["next"])
async def writes_tuples(ctx: NodeContext) -> Output:
    ctx.state["pair"] = (1, (2, 3))
    ctx.state["nested"] = {"point": (4, 5), "list": [(6,)]}
    return Output("next", update={"given": ("a", "b")})


@node(outputs=["next"], parks=True)
async def waits(ctx: NodeContext) -> Park | str:
    return "next" if ctx.signal is not None else Park(key=f"k-{ctx.run_id}")


def flow(*, parked: bool) -> Flow:
    b = FlowBuilder("urn:test:flow:stored-values").task("write", writes_tuples, {"next": "wait"})
    if parked:
        b = b.task("wait", waits, {"next": "end"})
    else:
        b = b.task("wait", writes_tuples, {"next": "end"})
    return b.terminal("end", "completed").build()


STORED = {
    "pair": [1, [2, 3]],
    "nested": {"point": [4, 5], "list": [[6]]},
    "given": ["a", "b"],
}


async def test_a_tuple_comes_back_a_list_in_a_clean_run() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(flow(parked=False), {"input": (7, 8)})
        stored = await engine.store.get_state(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state == {**STORED, "input": [7, 8]} == stored
    assert type(result.state["pair"]) is list and type(result.state["input"]) is list


async def test_a_tuple_comes_back_a_list_in_a_resumed_run() -> None:
    async with running() as (engine, _clock):
        parked = await engine.run(flow(parked=True))
        assert parked.lifecycle is Lifecycle.PARKED
        assert parked.state == STORED  # (let go: what the store holds)
        await engine.signal(parked.run_id, placement="wait", payload={"more": (9,)})
        result = await engine.wait(parked.run_id)
    assert result.state == {**STORED, "more": [9]}
