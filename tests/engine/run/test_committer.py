"""The committer folds into a commit what earlier steps left for the tokens it writes, and keeps
the rest for later commits; without an engine or a store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import TIMEOUT
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.instruments import NO_INSTRUMENTS
from flowtide.store.base import (
    Commit,
    EventRecord,
    Expect,
    ParkRecord,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def token(n: int) -> TokenRecord:
    return TokenRecord(
        id=f"r.{n}", run_id="r", placement="a", status=S.READY, visit=1, created_at=T0
    )


def committer() -> Committer:
    return Committer(cast(RunHost, object()))  # (folding needs no host)


def test_what_is_kept_for_a_token_goes_with_the_next_commit_that_writes_it() -> None:
    c = committer()
    one, two = token(1), token(2)
    entry = TIMEOUT.entry(T0, "r", one.id)
    c.expect[one.id] = Expect(S.PARKED, 3)
    c.expect[two.id] = Expect(S.WAITING, 1)
    c.fires[one.id] = T0 + timedelta(seconds=1)
    c.fired[one.id] = [entry]
    first = Commit("r", tokens=[one])
    c.fold(first)
    assert first.expect == {one.id: Expect(S.PARKED, 3)}
    assert first.fires_deadline == T0 + timedelta(seconds=1)
    assert list(first.due_fired) == [entry]
    # What is kept for another token waits for a commit that writes it.
    assert list(c.expect) == [two.id] and not c.fires and not c.fired
    alone = Commit("r")
    c.fold(alone)
    assert alone.expect == {} and list(c.expect) == [two.id]


def test_parks_closed_in_memory_go_with_the_next_commit_whatever_it_writes() -> None:
    c = committer()
    park = ParkRecord("r.1#2", "r", "r.1", "a", 1, 2, T0)
    c.closing_parks.append(park)
    step = Commit("r")
    c.fold(step)
    assert list(step.parks) == [park] and c.closing_parks == []


def test_the_last_seq_is_read_from_the_last_commit_only_when_asked() -> None:
    c = committer()
    c.restored(7)
    assert c.last_seq() == 7
    c.stored_events = [
        EventRecord("node_started", "r", T0, seq=8),
        EventRecord("node_finished", "r", T0, seq=9),
    ]
    assert c.last_seq() == 9 and c.stored_events is None


class Recorded:
    """What a committer needs of its host to send commits: a store that records them (and
    refuses those ``refuse`` says), a clock, no instruments, no listeners."""

    def __init__(self, refuse: Callable[[Commit], bool] = lambda c: False) -> None:
        self.sent: list[Commit] = []
        self.refuse = refuse
        self.store = self
        self.clock = self
        self.instruments = NO_INSTRUMENTS

    def now(self) -> datetime:
        return T0

    async def commit(self, c: Commit) -> list[EventRecord]:
        self.sent.append(c)
        if self.refuse(c):
            raise StoreConflict("refused")
        return list(c.events)

    def publish(self, events: object) -> None:
        pass

    def wake_sweeper(self, when: datetime | None = None) -> None:
        pass


def sending(host: Recorded) -> Committer:
    return Committer(cast(RunHost, host))


def ev(kind: str) -> EventRecord:
    return EventRecord(kind, "r", T0)


async def test_commits_held_back_go_with_the_next_commit_sent() -> None:
    host = Recorded()
    c = sending(host)
    first = c.hold_back(Commit("r", tokens=[token(1)], events=[ev("node_finished")]))
    assert c.hold_back(Commit("r", tokens=[token(2)], events=[ev("join_arrived")])) is first
    await c.send(Commit("r", events=[ev("join_fired")]), shield=False)
    assert first.done() and first.exception() is None
    assert [[e.kind for e in s.events] for s in host.sent] == [
        ["node_finished", "join_arrived", "join_fired"]
    ]
    assert c.unsent() is None


async def test_a_commit_that_races_is_sent_after_the_commits_held_back() -> None:
    host = Recorded(refuse=lambda commit: bool(commit.expect))
    c = sending(host)
    held = c.hold_back(Commit("r", events=[ev("node_finished")]))
    racing = Commit("r", events=[ev("signalled")], expect={"r.1": S.PARKED})
    with pytest.raises(StoreConflict):
        await c.send(racing, shield=False)
    # The steps held back are stored: the racing step's refusal is its own.
    assert held.done() and held.exception() is None
    assert [[e.kind for e in s.events] for s in host.sent] == [["node_finished"], ["signalled"]]


async def test_commits_held_back_that_are_refused_fail_every_step_held_back() -> None:
    host = Recorded(refuse=lambda commit: True)
    c = sending(host)
    held = c.hold_back(Commit("r", events=[ev("node_finished")]))
    with pytest.raises(StoreConflict):
        await c.flush()
    assert isinstance(held.exception(), StoreConflict)
    assert c.unsent() is None
