"""A sweeper on PostgreSQL looks at the wake instants again only for notices that may move one:
not for a run's own resume and end (notices for who waits on an answer or an end), yet at once
for a run another process makes due (its notices are never slowed to the ``poll``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.store import RunRecord, SignalRequest
from flowtide.store.postgres.queries import channel_name
from tests.postgres_schemas import Schemas

NEVER = 3600.0
"""A poll (seconds) no test waits for: only notices wake the sweeper."""


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "approved"
    return Park(key=f"ask-{ctx.run_id}")


FLOW = FlowBuilder("urn:test:flow:notices").task("ask", ask, {"approved": "end"})
BUILT = FLOW.terminal("end").build()


async def test_a_resume_does_not_send_the_sweeper_to_the_wake_instants(schemas: Schemas) -> None:
    store = schemas.store()
    looks = 0
    next_wake = store.next_wake

    async def counted() -> datetime | None:
        nonlocal looks
        looks += 1
        return await next_wake()

    store.next_wake = counted  # type: ignore[method-assign]
    async with store, Engine(store=store, flows=[BUILT], poll=NEVER) as engine:
        runs = [(await engine.run(BUILT)).run_id for _ in range(10)]
        assert not engine.held_runs()
        before = looks
        for run_id in runs:
            await engine.signal(run_id, placement="ask", payload={"ok": True})
            assert (await engine.wait(run_id)).lifecycle is Lifecycle.COMPLETED
        # (One may be left of the runs parked before.) Each resume's wake and end notify who
        # waits for an answer or an end: not the sweeper, nothing having become due sooner.
        assert looks - before <= 1, looks - before


@pytest.mark.parametrize("prefix", ["", "told:"])
async def test_a_run_another_process_makes_due_is_taken_at_once(
    schemas: Schemas, prefix: str
) -> None:
    # (A run's id may begin as a notice for waiters only does: its notices still wake.)
    schema = schemas.new()
    async with (
        schemas.store(schema) as store,
        schemas.store(schema) as elsewhere,
        Engine(store=store, flows=[BUILT], poll=NEVER) as engine,
    ):
        for round_ in range(5):
            parked = await engine.run(BUILT, run_id=f"{prefix}run-{round_}")
            assert parked.lifecycle is Lifecycle.PARKED and not engine.held_runs()
            # Another process records a signal request: the run is due at once, and this
            # engine's sweeper must hear of it (it would not look again for an hour).
            request = {"placement": "ask", "payload": {"round": round_}}
            now = datetime.now(UTC)
            await elsewhere.request_signal(SignalRequest(f"q{round_}", parked.run_id, now, request))
            async with asyncio.timeout(60):
                result = await engine.wait(parked.run_id)
            assert result.lifecycle is Lifecycle.COMPLETED
            assert result.state == {"round": round_}


async def test_a_notice_for_waiters_only_does_not_end_a_sweepers_wait(schemas: Schemas) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as store, schemas.store(schema) as other:
        # Listening for sure (see test_schemas_of_one_database_do_not_meet).
        await store.wait_changed(0.5)
        await other.create_run(_probe("probe"), {})
        assert await store.wait_changed(10)
        for round_ in range(10):
            sweeper = asyncio.ensure_future(store.wait_changed(NEVER, wakes_only=True))
            waiter = asyncio.ensure_future(store.wait_changed(NEVER))
            _notify(schemas, schema, f"told:r{round_}")
            assert await asyncio.wait_for(waiter, 30)  # (heard: it ends who waits on answers)
            await asyncio.sleep(0)
            assert not sweeper.done()
            _notify(schemas, schema, f"r{round_}")  # (a run id: a wake instant may have moved)
            assert await asyncio.wait_for(sweeper, 30)


def _notify(schemas: Schemas, schema: str, payload: str) -> None:
    schemas.query("SELECT pg_notify(%s, %s)", schema, channel_name(schema), payload)


def _probe(run_id: str) -> RunRecord:
    return RunRecord(run_id, "urn:test:probe", "1", "pending", datetime.now(UTC))
