"""Commits of steps one after another stored as one: what may wait for the next, what may be
put together, and the one commit that does what they do in order; without an engine or a
store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from flowtide.engine.run.coalescing import CommitGroup, as_decided, may_wait
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    Lease,
    NodeAnchor,
    ParkRecord,
    RunRecord,
    ScatterItemRecord,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import EncodedState

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIVE = frozenset({"pending", "running", "parked"})


def token(n: int, status: TokenStatus = S.READY) -> TokenRecord:
    return TokenRecord(
        id=f"r.{n}", run_id="r", placement="a", status=status, visit=1, created_at=T0
    )


def event(kind: str, n: int) -> EventRecord:
    return EventRecord(kind, "r", T0, token_id=f"r.{n}")


def step(**fields: object) -> Commit:
    return Commit("r", run_lifecycles=LIVE, **fields)  # type: ignore[arg-type]


def test_a_commit_that_races_or_is_seen_outside_the_run_does_not_wait() -> None:
    assert may_wait(step(tokens=[token(1)], events=[event("node_finished", 1)]))
    assert not may_wait(step(expect={"r.1": Expect(S.PARKED, 1)}))
    assert not may_wait(step(fires_deadline=T0))
    assert not may_wait(step(release=True))
    assert not may_wait(step(wakes=[DueEntry(T0, "p", "p.1", "child_ended")]))
    ended = RunRecord("r", "urn:f", "v1", "completed", T0)
    assert not may_wait(step(run=ended))
    running = RunRecord("r", "urn:f", "v1", "running", T0)
    assert may_wait(step(run=running))


def test_steps_are_stored_as_one_commit_in_order() -> None:
    one, two = token(1), token(2)
    group = CommitGroup(step(tokens=[one], events=[event("node_finished", 1)]))
    then = step(tokens=[two, replace(one, status=S.WAITING)], events=[event("join_arrived", 2)])
    assert group.accepts(then)
    group.add(then)
    c = group.commit()
    # Each token once, where it first came, as it last was.
    assert [(t.id, t.status) for t in c.tokens] == [("r.1", S.WAITING), ("r.2", S.READY)]
    assert [e.kind for e in c.events] == ["node_finished", "join_arrived"]
    assert c.run_lifecycles == LIVE


def test_a_group_of_one_is_its_commit() -> None:
    alone = step(tokens=[token(1)])
    assert CommitGroup(alone).commit() is alone


def test_a_state_key_is_as_the_last_step_that_wrote_it_left_it() -> None:
    first = EncodedState({"a": 1, "b": 2})
    first.json = {"a": "1", "b": "2"}
    group = CommitGroup(step(state=first, state_deleted=["c"]))
    group.add(step(state={"a": 10, "c": 3}, state_deleted=["b"]))
    group.add(step(state_deleted=["a"]))
    c = group.commit()
    assert dict(c.state or {}) == {"c": 3}
    assert isinstance(c.state, EncodedState) and c.state.json == {}  # (no stale text kept)
    assert sorted(c.state_deleted) == ["a", "b"]


def test_a_due_entry_set_by_one_step_and_dropped_by_the_next_is_not_put_together() -> None:
    entry = DueEntry(T0 + timedelta(seconds=5), "r", "r.1", "timeout")
    group = CommitGroup(step(due=[entry]))
    assert not group.accepts(step(due_cleared=["r.1"]))
    assert not group.accepts(step(due_dropped=[("r.1", "timeout")]))
    assert not group.accepts(step(due_fired=[entry]))
    assert group.accepts(step(due_cleared=["r.2"]))
    # Set again by a later step: the later one is kept.
    later = replace(entry, when=T0 + timedelta(seconds=9))
    group.add(step(due=[later]))
    assert list(group.commit().due) == [later]


def test_an_anchor_released_by_one_step_and_stored_by_the_next_is_not_put_together() -> None:
    group = CommitGroup(step(anchors_released=[("a", None)]))
    assert not group.accepts(step(anchors=[NodeAnchor("r", "a", None, T0)]))
    assert group.accepts(step(anchors=[NodeAnchor("r", "b", None, T0)]))


def test_a_commit_under_another_lease_or_with_expectations_is_not_put_together() -> None:
    lease = Lease("r", "me", 1, T0)
    group = CommitGroup(replace(step(), lease=lease))
    assert group.accepts(replace(step(), lease=lease))
    assert not group.accepts(replace(step(), lease=replace(lease, epoch=2)))
    assert not group.accepts(replace(step(), lease=lease, expect={"r.1": S.PARKED}))
    assert not group.accepts(replace(step(), lease=lease, run_lifecycles=None))


def test_parks_and_scatter_items_are_written_once_each_as_they_last_were() -> None:
    park = ParkRecord("r.1#1", "r", "r.1", "a", 1, 1, T0)
    item = ScatterItemRecord("r", "s#1", 0, "done", "ok", 1)
    group = CommitGroup(step(parks=[park], scatter=[item]))
    group.add(step(parks=[replace(park, closed_by="signal")], scatter=[replace(item, result=2)]))
    c = group.commit()
    assert [p.closed_by for p in c.parks] == ["signal"]
    assert [r.result for r in c.scatter] == [2]


def test_a_token_held_back_keeps_every_field_as_it_was() -> None:
    t = TokenRecord(
        id="r.7",
        run_id="r",
        placement="b",
        status=S.WAITING,
        attempt=3,
        visit=2,
        lineage=(("s", 1, 2),),
        deadline=T0 + timedelta(seconds=5),
        due=T0 + timedelta(seconds=1),
        created_at=T0,
        data={"why": "retry", "nested": {"a": 1}},
        epoch=4,
    )
    held = step(tokens=[t])
    as_decided(held)
    (kept,) = held.tokens
    assert kept == t and kept is not t
    assert kept.data is not t.data


def test_a_commit_held_back_keeps_its_records_as_its_step_left_them() -> None:
    parked = token(1, S.PARKED)
    parked.data["why"] = "parked"
    run = RunRecord("r", "urn:f", "v1", "running", T0)
    held = step(tokens=[parked], run=run)
    as_decided(held)
    # A later step claims the token and changes the run, in memory.
    parked.status = S.READY
    parked.data["signal"] = {"ok": True}
    run.lifecycle = "parked"
    assert [(t.status, t.data) for t in held.tokens] == [(S.PARKED, {"why": "parked"})]
    assert held.run is not None and held.run.lifecycle == "running"
