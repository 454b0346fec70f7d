"""Checks of workers' heartbeats: written, replaced, listed, forgotten, and kept as copies."""

from __future__ import annotations

from flowtide.store.base import Store, WorkerRecord
from flowtide.store.jsonvalues import NotJSONError
from flowtide.testing.storechecks.support import at, raises, same


def beat(worker_id: str, seconds: float, **fields: object) -> WorkerRecord:
    """A heartbeat of ``worker_id``, started at 0 and seen ``seconds`` later."""
    record = WorkerRecord(worker_id, "host-a", 4242, at(0), at(seconds), 30.0)
    for name, value in fields.items():
        setattr(record, name, value)
    return record


async def worker_heartbeats_are_kept_and_forgotten(store: Store) -> None:
    same(list(await store.workers()), [], "the workers of an empty store")
    first = beat("w2", 1, runs_held=3, nodes=["urn:n:charge", "pay"], waiting={"r": ["ship"]})
    await store.record_worker(first)
    await store.record_worker(beat("w1", 2))
    same(list(await store.workers()), [beat("w1", 2), first], "two workers, by id")
    again = beat("w2", 11, runs_held=0, nodes=["pay"])
    await store.record_worker(again)
    same(list(await store.workers()), [beat("w1", 2), again], "a heartbeat replaced")
    with raises(NotJSONError, "a heartbeat that is not JSON"):
        await store.record_worker(beat("w3", 12, waiting={"r": {"ship"}}))
    same([w.worker_id for w in await store.workers()], ["w1", "w2"], "after a refused heartbeat")
    same(await store.forget_worker("w2"), True, "forgetting a worker")
    same(await store.forget_worker("w2"), False, "forgetting it again")
    same(list(await store.workers()), [beat("w1", 2)], "the workers left")


async def worker_heartbeats_are_copies(store: Store) -> None:
    written = beat("w1", 1, nodes=["pay"], waiting={"r": ["ship"]})
    await store.record_worker(written)
    written.nodes.append("changed after writing")
    written.waiting["r"].append("changed after writing")
    read = (await store.workers())[0]
    read.nodes.append("changed after reading")
    read.waiting.clear()
    same(
        list(await store.workers()),
        [beat("w1", 1, nodes=["pay"], waiting={"r": ["ship"]})],
        "a heartbeat changed after it was written and read",
    )
