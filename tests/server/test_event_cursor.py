"""The event stream's cursor: opening a stream of every run reads no event of the runs that
have ended, and of a run let go parked only those after its checkpoint; then each look reads
only the events after the last one sent."""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle
from flowtide.server.events import Cursor
from flowtide.store import EventRecord, MemoryStore
from tests.engine.engine_helpers import T0
from tests.engine.test_engine_leases import approval_flow
from tests.engine.test_engine_store_errors import chain


class Counting(MemoryStore):
    """Keeps each history read: (run id, ``after``)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int]] = []

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        self.reads.append((run_id, after))
        return await super().history(run_id, after)


async def test_a_stream_of_every_run_reads_only_what_comes_after_it_opened() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = Counting()
    async with Engine(store=store, clock=clock) as engine:
        ended = [(await engine.run(chain())).run_id for _ in range(3)]
        parked = await engine.run(approval_flow())
        assert parked.lifecycle is Lifecycle.PARKED
        checkpoint = (await store.get_run(parked.run_id)).checkpoint
        assert checkpoint is not None  # (let go parked)
        store.reads.clear()
        cursor = Cursor(store, None)
        await cursor.start(None)
        # Nothing of the ended runs; of the parked one, only what follows its checkpoint.
        assert store.reads == [(parked.run_id, checkpoint.seq)]
        assert cursor.ended == set(ended)
        assert await cursor.new_events() == []
        await engine.signal(key=f"approve:{parked.run_id}")
        await engine.wait(parked.run_id)
        later = await engine.run(chain())
        store.reads.clear()
        found = await cursor.new_events()
    await clock.aclose()
    moved = [e for e in found if e.run_id == parked.run_id]
    assert moved[0].kind == "signalled" and moved[0].seq == checkpoint.seq + 1
    assert moved[-1].kind == "run_finished"
    new = [e for e in found if e.run_id == later.run_id]
    assert new[0].kind == "run_started" and new[-1].kind == "run_finished"
    assert {run for run, _ in store.reads} == {parked.run_id, later.run_id}
    assert (parked.run_id, checkpoint.seq) in store.reads and (later.run_id, 0) in store.reads


async def test_a_stream_resumed_after_an_event_reads_the_events_after_it() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = Counting()
    async with Engine(store=store, clock=clock) as engine:
        run_id = (await engine.run(chain())).run_id
        cursor = Cursor(store, run_id)
        await cursor.start(f"{run_id}:2")
        found = await cursor.new_events()
    await clock.aclose()
    assert found[0].seq == 3 and found[-1].kind == "run_finished"
    assert run_id in cursor.ended  # (a stream of an ended run ends once it is sent)
