"""A run a worker cannot drive (its nodes do not resolve there) waits, visibly, for one that can;
a worker that was never given the flow drives a run from the document kept in the store."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.engine.engine import DEFER_UNFIREABLE
from flowtide.errors import NodeResolutionError
from flowtide.model import Flow
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import T0, at, of_kind


@node(id="approval:wait", outputs=["approved"], timeout="PT10S", register=False)
async def wait_for_ok(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


@node(outputs=["approved"], timeout="PT10S", register=False)
async def unregistered_wait(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


def approval(waiting: Any = wait_for_ok) -> Flow:
    return (
        FlowBuilder("urn:test:flow:unfireable")
        .task("w", waiting, {"approved": "yes", "timeout": "late"})
        .terminal("yes", "approved")
        .terminal("late", "late")
        .build()
    )


async def test_a_run_whose_nodes_do_not_resolve_waits_for_a_worker_that_can() -> None:
    clock = VirtualClock(T0)
    store = MemoryStore()
    nodes = NodeRegistry({"approval:wait": wait_for_ok})
    flow = approval()
    first = Engine(clock=clock, store=store, flows=[flow], registry=nodes)
    run_id = (await first.run(flow)).run_id
    await first.close()  # the parked run stays in the store, its deadline at 10 s

    stranger = Engine(clock=clock, store=store)  # cannot resolve "approval:wait"
    stranger.sweeper  # noqa: B018 - start its sweeper
    await clock.settle()
    await clock.advance_to(at(10))
    await clock.settle()
    # Nothing was changed or dropped: the deadline is still due, the run still parked, and the
    # stranger holds it aside until it may be tried again.
    assert [(e.when, e.purpose) for e in store.due_entries()] == [(at(10), "timeout")]
    (warning,) = of_kind(await stranger.history(run_id), "warning")
    assert "cannot drive this run" in warning.data["message"]
    assert "approval:wait" in warning.data["message"]
    assert (await store.get_run(run_id)).lifecycle == Lifecycle.PARKED
    lease = await store.lease_of(run_id)
    assert lease is not None and lease.expires == at(10) + DEFER_UNFIREABLE
    await stranger.close()

    owner = Engine(clock=clock, store=store, registry=nodes)  # the nodes, not the flow
    owner.sweeper  # noqa: B018
    await clock.settle()
    result = await owner.wait(run_id)
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "late")
    (timed_out,) = of_kind(await owner.history(run_id), "node_timed_out")
    assert timed_out.at == at(10)  # (the stranger gave the run back when it closed)
    await owner.close()


async def test_a_worker_drives_a_run_from_the_stored_document() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    flow = approval(unregistered_wait)
    first = Engine(clock=clock, store=store, flows=[flow])  # (runs the node it was built with)
    run_id = (await first.run(flow)).run_id
    await first.close()

    # Given no flow at all: its code registered (as a --nodes module registers it).
    nodes = NodeRegistry({unregistered_wait.id: unregistered_wait})
    worker = Engine(clock=clock, store=store, registry=nodes)
    result = await worker.wait(run_id)
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "late")
    await worker.close()


async def test_a_worker_without_the_code_logs_once_per_run_which_node_it_misses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock(T0)
    store = MemoryStore()
    flow = approval()
    client = Engine(clock=clock, store=store, flows=[flow], executes=False)
    runs = [(await client.start(flow)).run_id for _ in range(2)]
    stranger = Engine(clock=clock, store=store)  # cannot resolve "approval:wait"
    with caplog.at_level(logging.WARNING, logger="flowtide.engine"):
        stranger.sweeper  # noqa: B018
        await clock.settle()
        await clock.advance_to(at(2) + DEFER_UNFIREABLE)  # tried again: no second warning
        await clock.settle()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    for run_id in runs:
        (line,) = [w for w in warnings if f"run {run_id[:12]} " in w]
        assert "node 'approval:wait' is not registered here" in line
        assert "a --nodes module must register it" in line
        assert (await store.get_run(run_id)).lifecycle == Lifecycle.PENDING  # nothing ran
    await stranger.close()
    await client.close()


async def test_the_missing_code_error_carries_the_node_ids() -> None:
    flow = Flow.model_validate(approval().to_data())  # (as read from a document: no code)
    async with Engine(clock=VirtualClock(T0, autojump=True)) as engine:
        with pytest.raises(NodeResolutionError) as caught:
            await engine.start(flow)
    assert caught.value.refs == ("approval:wait",)
    assert "placement 'w' (/placements/0/node): node 'approval:wait'" in str(caught.value)
    assert "cannot import" not in str(caught.value)
