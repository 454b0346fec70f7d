"""The lease renewer tells a run taken by another worker from one this worker has just given
back (or ended) before the executor that did it let go of it; the worker that takes a run counts
it as a takeover only if another worker held it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

import pytest

from flowtide.clock import VirtualClock
from flowtide.engine.worker.leases import Holder, LeaseRenewer, aside_owner, count_takeovers
from flowtide.store import Commit, Lease, RunRecord
from flowtide.store.memory import MemoryStore
from tests.engine.engine_helpers import T0

TTL = timedelta(seconds=30)


@dataclass
class Held:
    lease: Lease | None
    taking: Lease | None = None


async def renewing(store: MemoryStore, clock: VirtualClock, held: dict[str, Held]) -> list[Holder]:
    """What the renewer reports lost over one renewal."""
    lost: list[Holder] = []
    renewer = LeaseRenewer(store, clock, "me", TTL, lambda: held, lost.append)
    renewer.start()
    await clock.advance(TTL / 3)
    renewer.close()
    return lost


async def held_run(store: MemoryStore) -> Held:
    run = RunRecord("r1", "urn:test:flow", "1", "running", T0)
    lease = Lease("r1", "me", 1, T0 + TTL)
    await store.create_run(run, {}, lease=lease)
    return Held(lease)


async def test_a_run_given_back_meanwhile_is_not_reported_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = MemoryStore(), VirtualClock(T0)
    holder = await held_run(store)
    assert holder.lease is not None
    await store.commit(Commit("r1", lease=holder.lease, release=True))
    with caplog.at_level(logging.WARNING, "flowtide.engine"):
        lost = await renewing(store, clock, {"r1": holder})
    assert lost == [] and "taken over" not in caplog.text


async def test_a_run_another_worker_took_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    store, clock = MemoryStore(), VirtualClock(T0)
    holder = await held_run(store)
    now = clock.now()
    assert await store.acquire_run("r1", "other", now, now + TTL, force=True) is not None
    with caplog.at_level(logging.WARNING, "flowtide.engine"):
        lost = await renewing(store, clock, {"r1": holder})
    assert lost == [holder] and "run r1 was taken over by another worker" in caplog.text


def test_only_a_run_taken_from_another_workers_lease_is_counted() -> None:
    class Counted:
        takeovers = 0

        def taken_over(self) -> None:
            self.takeovers += 1

        def commit(self, seconds: float) -> None: ...
        def attempt(self, outcome: str, seconds: float) -> None: ...
        def late(self, seconds: float) -> None: ...

    seen = Counted()
    expires = T0 + TTL
    count_takeovers(
        seen,
        [
            None,  # (not taken: held alive elsewhere, or ended)
            Lease("a", "me", 1, expires),  # (from nobody, or from this worker)
            Lease("b", "me", 2, expires, taken_from=aside_owner("other")),  # (its set-aside over)
            Lease("c", "me", 2, expires, taken_from="other"),
        ],
    )
    assert seen.takeovers == 1
