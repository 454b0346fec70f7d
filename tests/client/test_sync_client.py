"""The synchronous client: its calls block their thread, any number of threads call one client
at once, while a worker (on the test's event loop, as another process would be) runs the runs.
On a SQLite file and on PostgreSQL, each opened by the client from its URL; and on a memory
store given to it, for what needs no worker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from flowtide import Client, Engine, Lifecycle, RequestPending, UnknownRunError
from flowtide.store import MemoryStore, Store, StoreOpenError
from flowtide.store.sqlite import SQLiteStore
from tests.client.approval import FLOW, approval
from tests.postgres_schemas import Schemas

T = TypeVar("T")
RUNS = 12


async def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call`` in a thread of its own, so that the worker on this loop goes on meanwhile."""
    return await asyncio.to_thread(call, *args, **kwargs)


async def many_threads_drive_runs(client: Client, store: Store) -> None:
    worker = Engine(store=store, poll=0.02)
    try:
        assert [r.new for r in await off_loop(client.register, approval())] == [True]
        seen: set[str] = set()

        def start(n: int) -> str:
            seen.add(threading.current_thread().name)
            return client.start(FLOW, {"order": n})

        run_ids = await asyncio.gather(*(off_loop(start, n) for n in range(RUNS)))
        assert len(set(run_ids)) == RUNS and len(seen) > 1, "started from several threads"
        for run_id in run_ids:
            await worker.wait_parked(run_id)
        why = await off_loop(client.explain, run_ids[0], "review")
        assert (why.placement, why.status) == ("review", "parked")
        assert [p.key for p in (await off_loop(client.get, run_ids[0])).parked] == ["review:0"]
        receipts = await asyncio.gather(
            *(
                off_loop(client.signal, key=f"review:{n}", output="approved", payload={"n": n})
                for n in range(RUNS)
            )
        )
        assert sorted(r.run_id for r in receipts) == sorted(run_ids)
        ends = await asyncio.gather(*(off_loop(client.wait, r, timeout=30) for r in run_ids))
        assert [(e.lifecycle, e.state["n"]) for e in ends] == [
            (Lifecycle.COMPLETED, n) for n in range(RUNS)
        ]
        listed = await off_loop(client.runs, lifecycle="completed", limit=None)
        assert sorted(r.run_id for r in listed) == sorted(run_ids)
        assert (await off_loop(client.flows))[0].runs == RUNS
        history = await off_loop(client.history, run_ids[0])
        assert history[-1].kind == "run_finished"
    finally:
        await worker.close()


async def test_threads_share_a_client_on_a_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    await store.open()
    client = await off_loop(Client, f"sqlite:///{path}", poll=0.02)
    try:
        await many_threads_drive_runs(client, store)
    finally:
        await off_loop(client.close)
        await store.close()


async def test_threads_share_a_client_on_postgres(schemas: Schemas) -> None:
    store = schemas.store()
    await store.open()
    url = f"{schemas.url}?schema={store.schema}"
    client = await off_loop(Client, url, poll=0.02)
    try:
        await many_threads_drive_runs(client, store)
    finally:
        await off_loop(client.close)
        await store.close()


def test_a_client_on_a_memory_store_it_was_given() -> None:
    store = MemoryStore()
    with Client(store) as client:
        (registered,) = client.register(approval())
        run_id = client.start(FLOW, {"order": 7})
        assert client.get(run_id).lifecycle == Lifecycle.PENDING
        assert [r.run_id for r in client.runs()] == [run_id]
        assert [e.kind for e in client.history(run_id)] == []
        with pytest.raises(TimeoutError):
            client.wait(run_id, timeout=0.05)
        # No worker: the cancel is recorded, for the worker that takes the run to apply.
        with pytest.raises(RequestPending) as pending:
            client.cancel(run_id, "changed my mind", wait=0)
        assert (pending.value.run_id, pending.value.kind) == (run_id, "cancel")
        assert client.get(run_id).lifecycle == Lifecycle.PENDING
        assert [(v.digest, v.runs) for v in client.flows()] == [(registered.digest, 1)]
        with pytest.raises(UnknownRunError):
            client.get("no-such-run")
    with pytest.raises(RuntimeError, match="closed"):
        client.flows()
    client.close()  # (again: nothing)


def test_a_url_that_names_no_store_leaves_no_thread_behind() -> None:
    before = threading.active_count()
    with pytest.raises(StoreOpenError, match="unknown kind of store"):
        Client("mysql://db/shop")
    assert threading.active_count() == before
