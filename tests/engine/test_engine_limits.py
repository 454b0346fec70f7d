"""Values over the engine's size limit are refused where they are made, and nothing of them is
stored."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Park
from flowtide.engine.state.limits import ValueTooLargeError
from flowtide.model import Flow
from tests.engine.engine_helpers import of_kind, running

LIMIT = 1000


@node(outputs=["done"], register=False)
async def fill(ctx: NodeContext) -> str:
    ctx.state["blob"] = "x" * (ctx.state.get("size", 0))
    return "done"


@node(outputs=["answered"], register=False)
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "answered"
    return Park(key=f"ask-{ctx.run_id}", payload={"form": "y" * ctx.state.get("form", 0)})


def filling() -> Flow:
    return (
        FlowBuilder("urn:test:flow:fill")
        .task("fill", fill, {"done": "end"})
        .terminal("end")
        .build()
    )


def asking() -> Flow:
    return (
        FlowBuilder("urn:test:flow:ask")
        .task("ask", ask, {"answered": "end"})
        .terminal("end")
        .build()
    )


async def test_a_node_that_makes_a_state_value_too_large_fails_naming_it() -> None:
    async with running(max_value_bytes=LIMIT) as (engine, _clock):
        result = await engine.run(filling(), {"size": LIMIT})
        state = await engine.store.get_state(result.run_id)
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert error.type == "ValueTooLargeError" and error.placement == "fill"
    assert error.details == {"where": "state/blob", "size": LIMIT + 2, "limit": LIMIT}
    assert "blob" not in state  # nothing of it was stored
    assert of_kind(history, "node_failed")


async def test_a_value_within_the_limit_is_kept_and_none_means_no_limit() -> None:
    async with running(max_value_bytes=LIMIT) as (engine, _clock):
        result = await engine.run(filling(), {"size": LIMIT - 2})
    assert result.lifecycle is Lifecycle.COMPLETED
    async with running(max_value_bytes=None) as (engine, _clock):
        result = await engine.run(filling(), {"size": 10 * LIMIT})
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_a_park_payload_too_large_fails_the_node() -> None:
    async with running(max_value_bytes=LIMIT) as (engine, _clock):
        result = await engine.run(asking(), {"form": LIMIT})
    assert result.lifecycle is Lifecycle.FAILED
    assert result.errors[0].details["where"] == "park payload"


async def test_a_signal_payload_too_large_is_refused_and_changes_nothing() -> None:
    async with running(max_value_bytes=LIMIT) as (engine, _clock):
        parked = await engine.run(asking())
        before = await engine.history(parked.run_id)
        with pytest.raises(ValueTooLargeError, match=r"signal payload is 1,0\d\d bytes"):
            await engine.signal(key=f"ask-{parked.run_id}", payload={"note": "z" * LIMIT})
        assert await engine.history(parked.run_id) == before
        await engine.signal(key=f"ask-{parked.run_id}", payload={"note": "fine"})
        result = await engine.wait(parked.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_an_input_too_large_starts_nothing() -> None:
    async with running(max_value_bytes=LIMIT) as (engine, _clock):
        with pytest.raises(ValueTooLargeError, match="input/order"):
            await engine.start(filling(), {"order": "o" * LIMIT})
        assert await engine.store.list_runs() == []
