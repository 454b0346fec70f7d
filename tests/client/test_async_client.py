"""The asynchronous client, on every store: flows registered and listed, runs started by flow
id, signalled, cancelled, read, explained and waited for, while a worker engine runs them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide import AsyncClient, Client, Engine, Lifecycle, SignalRefused, UnknownFlowError
from flowtide.clock import VirtualClock
from flowtide.documents import to_document
from flowtide.errors import FlowValidationError
from flowtide.store import MemoryStore, StoreError, StoreOpenError, UnknownRunError
from flowtide.store.urls import open_store
from tests.client.approval import FLOW, approval
from tests.engine.engine_helpers import T0, fresh_store, kinds

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


@asynccontextmanager
async def worker_and_client() -> AsyncIterator[tuple[Engine, AsyncClient]]:
    """A worker that knows no flow (it learns them from the store) and a client, on one store
    and one clock."""
    clock = VirtualClock(T0, autojump=True)
    store = fresh_store()
    await store.open()
    worker = Engine(store=store, clock=clock, poll=0.05)
    try:
        async with AsyncClient(store, clock=clock, poll=0.05) as client:
            yield worker, client
    finally:
        await worker.close()
        await store.close()
        await clock.aclose()


async def test_flows_are_registered_all_or_nothing_and_listed() -> None:
    async with worker_and_client() as (_, client):
        assert await client.flows() == []
        (first,) = await client.register(approval("1"))
        assert (first.flow_id, first.version, first.new) == (FLOW, "1", True)
        (again,) = await client.register(approval("1"))
        assert again == type(first)(FLOW, "1", first.digest, False)
        # A document (its data), then a bad one beside a good one: nothing of that call stored.
        (second,) = await client.register(to_document(approval("2")))
        bad = {"id": "urn:test:flow:bad", "placements": [{"id": "x", "kind": "task"}]}
        with pytest.raises(FlowValidationError):
            await client.register(approval("3"), bad)
        versions = await client.flows()
        assert [(v.version, v.digest, v.latest, v.runs) for v in versions] == [
            ("1", first.digest, False, 0),
            ("2", second.digest, True, 0),
        ]
        assert versions[0].stored_at == T0
        assert await client.flows("urn:test:flow:none") == []


async def test_a_run_started_by_flow_id_is_signalled_and_waited_for() -> None:
    async with worker_and_client() as (worker, client):
        with pytest.raises(
            UnknownFlowError,
            match=r"is registered with the engine \(engine.register_flow\) or stored",
        ):
            await client.start(FLOW, {"order": 1})
        await client.register(approval())
        run_id = await client.start(FLOW, {"order": 1})
        assert (await client.get(run_id)).lifecycle in (Lifecycle.PENDING, Lifecycle.RUNNING)
        await worker.wait_parked(run_id)
        now = await client.get(run_id)
        assert now.lifecycle == Lifecycle.PARKED
        assert [(p.placement, p.key) for p in now.parked] == [("review", "review:1")]
        why = await client.explain(run_id, "review")
        assert (why.placement, why.timeout) == ("review", timedelta(hours=1))
        receipt = await client.signal(
            key="review:1", output="approved", payload={"by": "ann"}, wait=None
        )
        assert (receipt.run_id, receipt.placement, receipt.output) == (run_id, "review", "approved")
        ended = await client.wait(run_id)
        assert (ended.lifecycle, ended.outcome, ended.state["by"]) == (
            Lifecycle.COMPLETED,
            "completed",
            "ann",
        )
        assert await client.get(run_id) == ended
        events = await client.history(run_id)
        assert kinds(events)[0] == "run_started" and kinds(events)[-1] == "run_finished"
        with pytest.raises(SignalRefused):
            await client.signal(run_id, placement="review", output="approved")
        (listed,) = await client.runs()
        assert (listed.run_id, listed.flow_id, listed.flow_version) == (run_id, FLOW, "1")
        assert (listed.lifecycle, listed.outcome) == (Lifecycle.COMPLETED, "completed")
        assert await client.runs(lifecycle="parked") == []
        assert await client.runs(flow_id="urn:test:flow:other") == []
        (version,) = await client.flows()
        assert version.runs == 1


async def test_a_run_is_cancelled_and_a_wait_times_out() -> None:
    async with worker_and_client() as (worker, client):
        await client.register(approval())
        run_id = await client.start(FLOW, {"order": 2}, run_id="order-2")
        with pytest.raises(StoreError, match="already exists"):
            await client.start(FLOW, {"order": 2}, run_id="order-2")
        await worker.wait_parked(run_id)
        with pytest.raises(TimeoutError, match="has not ended within 5 s"):
            await client.wait(run_id, timeout=5)
        assert await client.cancel(run_id, "no longer needed") is True
        assert (await client.get(run_id)).lifecycle == Lifecycle.CANCELLED
        assert (await client.wait(run_id, timeout=5)).lifecycle == Lifecycle.CANCELLED
        assert await client.cancel(run_id) is False
        with pytest.raises(UnknownRunError):
            await client.get("no-such-run")
        with pytest.raises(ValueError, match="lifecycle"):
            await client.runs(lifecycle="finished")


async def test_a_client_is_closed_once_and_then_refuses_calls() -> None:
    async with worker_and_client() as (_, client):
        await client.close()
        await client.close()
        with pytest.raises(RuntimeError, match="closed"):
            await client.flows()


async def test_a_coroutine_given_for_a_store_is_named_at_once() -> None:
    makers: list[Callable[[Any], object]] = [AsyncClient, Client, lambda s: Engine(store=s)]
    for make in makers:
        with pytest.raises(TypeError, match=r"a coroutine, not a store: await it first"):
            make(open_store("memory:"))
    with pytest.raises(TypeError, match="needs a store"):
        AsyncClient(42)  # type: ignore[arg-type]


class CountedOpens(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.opens = 0

    async def open(self) -> None:
        self.opens += 1
        await asyncio.sleep(0)  # (others call meanwhile)


async def test_calls_at_once_on_a_new_client_open_its_store_once() -> None:
    store = CountedOpens()
    async with AsyncClient(store) as client:
        await asyncio.gather(*(client.flows() for _ in range(10)))
    assert store.opens == 1
    fresh = CountedOpens()
    client = AsyncClient(fresh)
    await asyncio.gather(*(client.runs() for _ in range(10)))
    await client.close()
    assert fresh.opens == 1


async def test_a_store_that_cannot_be_opened_is_tried_again_on_the_next_call(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "later"
    client = AsyncClient(f"sqlite:///{folder / 'runs.db'}")
    with pytest.raises(StoreOpenError, match="does not exist"):
        await client.flows()
    folder.mkdir()
    assert await client.flows() == []
    await client.close()
