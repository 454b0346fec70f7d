"""One nesting limit for every value a run keeps, checked before anything is stored: a value
that nests deeper than the engine reads back is refused up front instead of failing its run in
a worker; and a string no store can write as UTF-8 is refused the same way."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Park
from flowtide.engine.state.limits import MAX_NESTING, ValueTooDeepError, check_nesting, check_size
from flowtide.model import Flow
from flowtide.store.jsonvalues import NotJSONError
from tests.engine.engine_helpers import running


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@node(outputs=["done"], register=False)
async def deepen(ctx: NodeContext) -> str:
    ctx.state["deep"] = nested(ctx.state.get("levels", 0))
    return "done"


@node(outputs=["answered"], register=False)
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "answered"
    return Park(key=f"ask-{ctx.run_id}")


def deepening() -> Flow:
    return (
        FlowBuilder("urn:test:flow:deepen")
        .task("deepen", deepen, {"done": "end"})
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


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 900])
async def test_an_input_nested_too_deep_starts_nothing(levels: int) -> None:
    async with running() as (engine, _clock):
        with pytest.raises(ValueTooDeepError, match=f"input/order nests .* {levels} levels deep"):
            await engine.start(deepening(), {"order": nested(levels)})
        assert await engine.store.list_runs() == []
        result = await engine.run(deepening(), {"order": nested(MAX_NESTING)})
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_a_signal_payload_nested_too_deep_is_refused_and_changes_nothing() -> None:
    async with running() as (engine, _clock):
        parked = await engine.run(asking())
        before = await engine.history(parked.run_id)
        with pytest.raises(ValueTooDeepError, match="signal payload"):
            await engine.signal(key=f"ask-{parked.run_id}", payload={"note": nested(900)})
        with pytest.raises(NotJSONError, match="lone surrogate"):
            await engine.signal(key=f"ask-{parked.run_id}", payload={"note": "\ud800"})
        assert await engine.history(parked.run_id) == before
        await engine.signal(key=f"ask-{parked.run_id}", payload={"note": "fine"})
        result = await engine.wait(parked.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED


async def test_a_node_that_nests_state_too_deep_fails_naming_it() -> None:
    async with running(max_value_bytes=None) as (engine, _clock):
        result = await engine.run(deepening(), {"levels": 900})
        state = await engine.store.get_state(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert error.type == "ValueTooDeepError" and error.placement == "deepen"
    assert error.details == {"where": "state/deep", "depth": 900, "limit": MAX_NESTING}
    assert "deep" not in state


def test_brackets_inside_strings_are_text() -> None:
    check_nesting('["' + "[" * 500 + '", "\\"[[[["]', "x")
    with pytest.raises(ValueTooDeepError, match="x nests lists and objects 101 levels deep"):
        check_nesting("[" * 101 + "]" * 101, "x")
    check_size({"a": nested(MAX_NESTING - 1)}, "x", None)
