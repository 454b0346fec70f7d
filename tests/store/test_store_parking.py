"""Store support for parking: compare-and-set, due purposes, parks, anchors, signal answers.

Every instant comes from the caller; the store never reads a clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowtide.store import (
    Commit,
    DueEntry,
    DuplicateSignal,
    Expect,
    MemoryStore,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    SignalAnswer,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
P = TokenStatus.PARKED


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def parked_store() -> MemoryStore:
    store = MemoryStore()
    await store.create_run(RunRecord("r", "urn:f", "1", "parked", T0), {})
    token = TokenRecord("r.1", "r", "a", P, deadline=t(10), epoch=3)
    park = ParkRecord("r.1#3", "r", "r.1", "a", 1, 3, T0, t(10), key="k")
    await store.commit(
        Commit("r", tokens=[token], parks=[park], due=[DueEntry(t(10), "r", "r.1", "timeout")])
    )
    return store


def moved(epoch: int = 4) -> TokenRecord:
    return TokenRecord("r.1", "r", "b", TokenStatus.READY, epoch=epoch)


async def test_the_first_of_two_racing_commits_wins_the_other_is_refused() -> None:
    store = await parked_store()
    cas = {"r.1": Expect(P, 3)}
    await store.commit(Commit("r", tokens=[moved()], expect=cas, state={"winner": "signal"}))
    with pytest.raises(StoreConflict, match="is ready, not parked"):
        await store.commit(Commit("r", tokens=[moved()], expect=cas, state={"winner": "timeout"}))
    assert await store.get_state("r") == {"winner": "signal"}


async def test_expect_checks_the_epoch_and_that_the_deadline_is_still_ahead() -> None:
    store = await parked_store()
    with pytest.raises(StoreConflict, match="at epoch 3, not 2"):
        await store.commit(Commit("r", tokens=[moved()], expect={"r.1": Expect(P, 2)}))
    with pytest.raises(StoreConflict, match="past its deadline"):
        await store.commit(Commit("r", tokens=[moved()], expect={"r.1": Expect(P, 3, t(10))}))
    await store.commit(Commit("r", tokens=[moved()], expect={"r.1": Expect(P, 3, t(9.999))}))
    assert (await store.token("r", "r.1")) == moved()


async def test_several_due_entries_per_token_by_purpose() -> None:
    store = await parked_store()
    timer = DueEntry(t(5), "r", "r.1", "timer:1:0")
    await store.commit(Commit("r", due=[timer, DueEntry(t(7), "r", "r.1", "timer:1:1")]))
    await store.commit(Commit("r", due_dropped=[("r.1", "timer:1:1")]))
    assert [(e.when, e.purpose) for e in store.due_entries()] == [
        (t(5), "timer:1:0"),
        (t(10), "timeout"),
    ]
    assert await store.claim_due(t(5)) == [timer]
    # Re-arming a purpose replaces its entry (the old heap entry is skipped lazily).
    await store.commit(Commit("r", due=[DueEntry(t(20), "r", "r.1", "timeout")]))
    assert await store.next_due() == t(20)
    await store.commit(Commit("r", due_cleared=["r.1"]))
    assert await store.next_due() is None


async def test_parks_are_found_by_run_key_and_placement_and_closed_in_place() -> None:
    store = await parked_store()
    (park,) = await store.parks(key="k")
    assert (park.run_id, park.status) == ("r", ParkStatus.PARKED)
    park.status = ParkStatus.TIMED_OUT
    park.closed_at = t(10)
    assert (await store.parks(run_id="r", open_only=True))[0].status is ParkStatus.PARKED
    await store.commit(Commit("r", parks=[park]))
    assert await store.parks(run_id="r", open_only=True) == []
    assert [p.status for p in await store.parks(run_id="r", placement="a")] == ["timed_out"]
    assert await store.parks(run_id="r", placement="b") == []
    with pytest.raises(StoreError):
        await store.parks()


async def test_node_anchors_are_stored_once_and_released() -> None:
    store = await parked_store()
    await store.commit(
        Commit("r", anchors=[NodeAnchor("r", "a", None, t(1)), NodeAnchor("r", "s", "0", t(2))])
    )
    assert sorted((a.placement, a.item) for a in await store.node_anchors("r")) == [
        ("a", None),
        ("s", "0"),
    ]
    await store.commit(Commit("r", anchors_released=[("a", None)]))
    assert [a.placement for a in await store.node_anchors("r")] == ["s"]


async def test_a_signal_answer_is_kept_once_per_idempotency_key() -> None:
    store = await parked_store()
    await store.commit(Commit("r", signal_answers=[SignalAnswer("key-1", "r", {"n": 1})]))
    with pytest.raises(DuplicateSignal):
        await store.commit(
            Commit("r", state={"x": 1}, signal_answers=[SignalAnswer("key-1", "r", {"n": 2})])
        )
    answer = await store.signal_answer("key-1")
    assert answer is not None and answer.answer == {"n": 1}
    assert await store.get_state("r") == {}
    assert await store.signal_answer("other") is None


async def test_parks_by_run_and_by_key_keep_their_order_from_one_park_to_several() -> None:
    store = await parked_store()  # r.1#3, key k
    assert [p.id for p in await store.parks(run_id="r")] == ["r.1#3"]
    again = ParkRecord("r.1#3", "r", "r.1", "a", 1, 3, T0, t(10), key="k", payload={"n": 1})
    await store.commit(Commit("r", parks=[again]))  # the same park again: indexed once
    assert [p.payload for p in await store.parks(key="k")] == [{"n": 1}]
    await store.create_run(RunRecord("s", "urn:f", "1", "parked", T0), {})
    for i, (run, key) in enumerate([("r", "k"), ("s", "k"), ("r", None)], 4):
        park = ParkRecord(f"{run}.1#{i}", run, f"{run}.1", "a", 1, i, t(i), key=key)
        await store.commit(Commit(run, parks=[park]))
    assert [p.id for p in await store.parks(run_id="r")] == ["r.1#3", "r.1#4", "r.1#6"]
    assert [p.id for p in await store.parks(key="k")] == ["r.1#3", "r.1#4", "s.1#5"]
    assert [p.id for p in await store.parks(key="k", run_id="s")] == ["s.1#5"]
    assert await store.parks(key="none") == []


async def test_due_entries_list_the_live_entries_after_resets_and_claims() -> None:
    store = await parked_store()  # r.1 timeout at 10
    await store.commit(
        Commit(
            "r",
            due=[DueEntry(t(20), "r", "r.1", "timeout"), DueEntry(t(5), "r", "r.1", "timer:a")],
        )
    )
    assert store.due_entries() == [
        DueEntry(t(5), "r", "r.1", "timer:a"),
        DueEntry(t(20), "r", "r.1", "timeout"),
    ]
    assert await store.claim_due(t(30), limit=1) == [DueEntry(t(5), "r", "r.1", "timer:a")]
    assert store.due_entries() == [DueEntry(t(20), "r", "r.1", "timeout")]
    await store.commit(Commit("r", due_dropped=[("r.1", "timeout")]))
    assert store.due_entries() == [] and await store.next_due() is None


def _old_check(expect: Expect, token: TokenRecord | None) -> str | None:
    """Expect.check as it read before it checked fields (the reference)."""
    if token is None:
        return "missing"
    wanted = expect.status if isinstance(expect.status, frozenset) else frozenset({expect.status})
    if token.status not in wanted:
        return f"{token.status.value}, not {'/'.join(sorted(s.value for s in wanted))}"
    if expect.epoch is not None and token.epoch != expect.epoch:
        return f"at epoch {token.epoch}, not {expect.epoch}"
    deadline = token.deadline
    if expect.alive_at is not None and deadline is not None and deadline <= expect.alive_at:
        return f"past its deadline {deadline.isoformat()}"
    return None


def test_expect_on_fields_says_what_expect_on_records_says() -> None:
    expects = [
        Expect(P),
        Expect(P, 3),
        Expect(P, 3, t(10)),
        Expect(frozenset({P, TokenStatus.WAITING}), 2, t(5)),
        Expect(TokenStatus.RUNNING, None, t(20)),
    ]
    for status in TokenStatus:
        for epoch in (2, 3):
            for deadline in (None, t(5), t(10), t(30)):
                token = TokenRecord("r.1", "r", "a", status, deadline=deadline, epoch=epoch)
                for expect in expects:
                    want = _old_check(expect, token)
                    assert expect.check(token) == want
                    # As the memory store calls it: the status as stored (its value).
                    assert expect.mismatch(status.value, epoch, deadline) == want
    assert Expect(P).check(None) == "missing"
