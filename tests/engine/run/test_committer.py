"""The committer folds into a commit what earlier steps left for the tokens it writes, and keeps
the rest for later commits; without an engine or a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import TIMEOUT
from flowtide.engine.worker._host import RunHost
from flowtide.store.base import (
    Commit,
    EventRecord,
    Expect,
    ParkRecord,
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
