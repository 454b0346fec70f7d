"""The runs an engine holds (``HeldRuns``), on stand-ins for its presence, waiters and sweeper:
what is forgotten, what takes room, when the sweeper is woken; and a stale executor given back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import Clock, VirtualClock
from flowtide.engine import NodeContext, RunResult
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.worker.holding import HeldRuns
from flowtide.store import Commit, EventRecord, Lease, MemoryStore, RunRecord, Store, StoreDown
from tests.engine.engine_helpers import T0, running


@dataclass
class Settings:
    store: Store
    clock: Clock
    owner: str = "me"
    lease_ttl: timedelta = timedelta(seconds=30)
    max_runs: int | None = None


@dataclass
class Aside:
    deferred: list[tuple[str, timedelta]] = field(default_factory=list)

    async def defer(self, run_id: str, delay: timedelta) -> None:
        self.deferred.append((run_id, delay))


@dataclass
class Told:
    """A stand-in for the engine's presence: what it was told."""

    changed: asyncio.Event = field(default_factory=asyncio.Event)
    aside: Aside = field(default_factory=Aside)
    given_back: list[tuple[list[str], str]] = field(default_factory=list)

    def let_go(self, run: RunRecord) -> None: ...
    def ended(self, run: RunRecord) -> None: ...

    def gave_back(self, run_ids: Iterable[str], why: str) -> None:
        self.given_back.append((list(run_ids), why))


@dataclass
class Waiters:
    settled_runs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    let_go_runs: list[str] = field(default_factory=list)

    def waiting(self, run_id: str) -> bool:
        return False

    def let_go(self, run_id: str) -> None:
        self.let_go_runs.append(run_id)

    def settled(self, result: RunResult) -> None:
        self.settled_runs.append(result.run_id)

    def fail(self, run_id: str, error: Exception) -> None:
        self.failed.append(run_id)

    async def from_store(self, store: Store, run_id: str, *, parked: bool = False) -> None: ...


@dataclass
class Sweeper:
    wakes: list[datetime | None] = field(default_factory=list)

    def wake(self, when: datetime | None = None) -> None:
        self.wakes.append(when)


@dataclass
class Run:
    lifecycle: str


@dataclass
class StandInExecutor:
    """Not a run executor: only its run's lifecycle is read, and whether it was closed."""

    run: Run
    released: bool = False

    def close(self, notify: bool = True) -> None:
        self.released = True


def held_runs(
    max_runs: int | None = None, *, sweeper: Sweeper | None = None
) -> tuple[HeldRuns, Told, Waiters]:
    told, waiters = Told(), Waiters()
    settings = Settings(MemoryStore(), VirtualClock(T0), max_runs=max_runs)
    return HeldRuns(settings, told, waiters, lambda: sweeper), told, waiters


async def test_a_forgotten_executor_is_dropped_under_every_id_it_was_held_by() -> None:
    held, told, _ = held_runs()
    ex, other = StandInExecutor(Run("running")), StandInExecutor(Run("running"))
    held.runs.update({"a": ex, "b": ex, "c": other})  # type: ignore[dict-item]
    held.forget(ex)
    assert list(held.runs) == ["c"]
    assert told.changed.is_set()
    held.close()


async def test_who_waits_on_a_run_let_go_without_its_end_is_told_and_not_at_its_end() -> None:
    # (Told: from now on it watches the store. At the end the end itself answers it.)
    held, _, waiters = held_runs()
    let_go, ended = StandInExecutor(Run("parked")), StandInExecutor(Run("running"))
    held.runs.update({"a": let_go, "b": ended})  # type: ignore[dict-item]
    held.forget(let_go)
    held.forget_ended(ended)
    assert waiters.let_go_runs == ["a"] and not held.runs
    held.close()


async def test_only_runs_not_parked_take_room() -> None:
    held, _, _ = held_runs()
    for run_id, lifecycle in [("a", "running"), ("b", "parked"), ("c", "pending")]:
        held.runs[run_id] = StandInExecutor(Run(lifecycle))  # type: ignore[assignment]
    assert held.at_work() == 2
    held.close()


async def test_the_sweeper_is_woken_for_room_only_when_the_engine_has_a_limit() -> None:
    for limit, wakes in [(None, 0), (2, 2)]:
        sweeper = Sweeper()
        held, _, waiters = held_runs(limit, sweeper=sweeper)
        ex = StandInExecutor(Run("running"))
        held.runs["a"] = ex  # type: ignore[assignment]
        held.forget(ex)  # (room for another run)
        held.settled(RunResult(run_id="a", lifecycle=Lifecycle.PARKED, outcome=None, state={}))
        assert len(sweeper.wakes) == wakes
        assert waiters.settled_runs == ["a"]
        held.close()


async def test_no_sweeper_no_wake() -> None:
    held, _, _ = held_runs(1, sweeper=None)
    held.wake_sweeper()  # (a client, or a closed engine: nothing to wake)
    held.close()


async def test_closing_closes_and_drops_every_executor() -> None:
    held, _, _ = held_runs()
    executors = [StandInExecutor(Run("running")), StandInExecutor(Run("parked"))]
    held.runs.update({"a": executors[0], "b": executors[1]})  # type: ignore[dict-item]
    held.close()
    assert held.runs == {} and all(ex.released for ex in executors)


gate: asyncio.Event | None = None


@node(outputs=["done"])
async def held_open(ctx: NodeContext) -> Any:
    assert gate is not None
    await gate.wait()
    return "done"


async def test_a_stale_executor_is_closed_and_its_run_given_back() -> None:
    global gate
    gate = asyncio.Event()
    flow = (
        FlowBuilder("urn:test:flow:held")
        .task("work", held_open, {"done": "end"})
        .terminal("end")
        .build()
    )
    async with running(autojump=False) as (engine, _):
        handle = await engine.start(flow)
        await asyncio.sleep(0)
        ex = engine.held.runs[handle.run_id]
        assert ex.lease is not None and ex.lease.owner == engine.owner
        sweeper, told = Sweeper(), Told()
        held = HeldRuns(engine, told, Waiters(), lambda: sweeper)
        held.hold(handle.run_id, ex)
        held.discard(ex)
        for _ in range(5):
            await asyncio.sleep(0)
        assert handle.run_id not in held.runs
        assert told.given_back == [([handle.run_id], "out of date here")]
        assert await engine.store.lease_of(handle.run_id) is None  # given back in the store
        assert sweeper.wakes == [None]
        held.close()
        gate.set()


async def test_a_run_let_go_while_the_store_is_down_is_given_back_once_it_answers() -> None:
    # Given back again while the store does not answer: the run needs no lease to expire
    # before another worker (or this one) drives it again.
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    await store.create_run(RunRecord("r", "urn:test:held", "1", "pending", T0), {})
    lease = await store.acquire_run("r", "me", T0, T0 + timedelta(seconds=30))
    assert lease is not None
    refusals = 12  # (more than one give-back's tries: see COMMIT_ATTEMPTS)
    commit = store.commit

    async def down_for_a_while(c: Commit) -> Sequence[EventRecord]:
        nonlocal refusals
        if refusals:
            refusals -= 1
            raise StoreDown("the store does not answer")
        return await commit(c)

    store.commit = down_for_a_while  # type: ignore[method-assign,assignment]
    sweeper = Sweeper()
    held = HeldRuns(Settings(store, clock), Told(), Waiters(), lambda: sweeper)
    try:
        await held.give_back(lease)
        assert refusals == 0
        assert await store.lease_of("r") is None
        assert sweeper.wakes == [None]
    finally:
        held.close()
        await clock.aclose()


@dataclass
class LeasedStandIn(StandInExecutor):
    """A stand-in for the executor of a run held here under ``lease`` (renewed with it)."""

    lease: Lease | None = None
    taking: Lease | None = None


async def test_a_run_being_given_back_keeps_its_lease_unrenewed_while_the_store_flaps() -> None:
    """The store refuses every commit (the give-back) but answers the renewals: the run held
    here is renewed, the one given back is not, and another worker takes it once its lease has
    expired (renewed, it would be held by nobody at work for as long as this engine lives)."""
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    leases: dict[str, Lease] = {}
    for run_id in ("back", "kept"):
        await store.create_run(RunRecord(run_id, "urn:test:held", "1", "running", T0), {})
        taken = await store.acquire_run(run_id, "me", T0, T0 + timedelta(seconds=30))
        assert taken is not None
        leases[run_id] = taken

    async def refused(c: Commit) -> Sequence[EventRecord]:
        raise StoreDown("the store does not answer now")

    store.commit = refused  # type: ignore[method-assign,assignment]
    held = HeldRuns(Settings(store, clock), Told(), Waiters(), lambda: None)
    try:
        held.hold("kept", LeasedStandIn(Run("running"), lease=leases["kept"]))  # type: ignore[arg-type]
        await held.give_back(leases["back"])
        assert clock.now() >= T0 + timedelta(seconds=30)
        assert await store.lease_of("back") == leases["back"]  # (never renewed)
        kept = await store.lease_of("kept")
        assert kept is not None and kept.expires > clock.now()
        taken_over = await store.acquire_run("back", "other", clock.now(), clock.now())
        assert taken_over is not None and taken_over.taken_from == "me"
    finally:
        held.close()
        await clock.aclose()
