"""Output contracts: with ``validate_outputs``, the state an output carries is checked against
the output's JSON Schema; a violation takes the placement's ``error`` route, or fails the run
naming the output and where the state broke."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Output
from flowtide.model import Flow
from tests.engine.engine_helpers import of_kind, running

PRICED = {
    "type": "object",
    "required": ["order"],
    "properties": {
        "order": {
            "type": "object",
            "required": ["total"],
            "properties": {"total": {"type": "number", "minimum": 0}},
        }
    },
}


@node(outputs=["priced", "error"], output_schemas={"priced": PRICED})
async def price(ctx: NodeContext) -> Any:
    order = ctx.state["order"]
    if "total" in ctx.state:
        return Output("priced", update={"order": {**order, "total": ctx.state["total"]}})
    return "priced"  # forgot the total


def flow(route_error: bool) -> Flow:
    b = FlowBuilder(f"urn:test:flow:contract-{route_error}")
    routes = {"priced": "done", "error": "rejected"} if route_error else {"priced": "done"}
    b.task("price", price, routes).terminal("done")
    if route_error:
        b.terminal("rejected", "rejected")
    return b.build()


async def test_a_violation_takes_the_error_route() -> None:
    async with running(validate_outputs=True) as (engine, _clock):
        result = await engine.run(flow(True), {"order": {"id": 7}})
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED and result.outcome == "rejected"
    (failed,) = of_kind(history, "node_failed")
    assert failed.data["error"]["type"] == "OutputContractError"
    assert failed.data["to"] == ["rejected"]
    assert "'total' is a required property" in failed.data["error"]["message"]


async def test_an_unrouted_violation_fails_the_run_naming_the_output_and_where() -> None:
    async with running(validate_outputs=True) as (engine, _clock):
        result = await engine.run(flow(False), {"order": {"id": 7}, "total": -1})
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert error.type == "OutputContractError" and error.placement == "price"
    assert "output 'priced'" in error.message
    assert "/order/total" in error.message and "minimum" in error.message


@pytest.mark.parametrize("validate", [True, False])
async def test_a_state_that_fits_passes_and_nothing_is_checked_unless_asked(
    validate: bool,
) -> None:
    async with running(validate_outputs=validate) as (engine, _clock):
        fits = await engine.run(flow(False), {"order": {"id": 7}, "total": 12.5})
        breaks = await engine.run(flow(False), {"order": {"id": 8}})
    assert fits.lifecycle is Lifecycle.COMPLETED
    assert fits.state["order"] == {"id": 7, "total": 12.5}
    assert breaks.lifecycle is (Lifecycle.FAILED if validate else Lifecycle.COMPLETED)
