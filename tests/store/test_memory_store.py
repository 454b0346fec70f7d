"""The in-memory store: atomic commits, the due index, history order, copies."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowtide.store import (
    Commit,
    DueEntry,
    EventRecord,
    MemoryStore,
    NodeAnchor,
    ParkRecord,
    RunRecord,
    ScatterItemRecord,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def new_store(*runs: str) -> MemoryStore:
    store = MemoryStore()
    for run_id in runs:
        await store.create_run(RunRecord(run_id, "urn:f", "1", "pending", T0), {"k": 1})
    return store


async def test_a_commit_applies_tokens_state_and_events_together() -> None:
    store = await new_store("r")
    token = TokenRecord("r.1", "r", "a", TokenStatus.RUNNING, deadline=t(5))
    events = await store.commit(
        Commit(
            "r",
            tokens=[token],
            state={"x": 2},
            state_deleted=["k"],
            events=[EventRecord("node_started", "r", T0, "a"), EventRecord("x", "r", T0)],
        )
    )
    assert [e.seq for e in events] == [1, 2]
    assert await store.get_state("r") == {"x": 2}
    (stored,) = await store.tokens("r")
    assert (stored.status, stored.deadline) == (TokenStatus.RUNNING, t(5))
    assert [e.kind for e in await store.history("r")] == ["node_started", "x"]
    assert [e.seq for e in await store.history("r", after=1)] == [2]


async def test_expect_makes_a_commit_conditional_and_all_or_nothing() -> None:
    store = await new_store("r")
    token = TokenRecord("r.1", "r", "a", TokenStatus.RUNNING)
    await store.commit(Commit("r", tokens=[token]))
    with pytest.raises(StoreConflict, match="is running, not parked"):
        await store.commit(
            Commit(
                "r",
                state={"x": 1},
                expect={"r.1": TokenStatus.PARKED},
                events=[EventRecord("e", "r", T0)],
            )
        )
    assert await store.get_state("r") == {"k": 1}
    assert await store.history("r") == []


async def test_a_run_with_one_token_then_several_reads_and_checks_each_of_them() -> None:
    # A run's one token is kept as its row alone, a second makes a dict of them: every read, and
    # every expectation, sees the same tokens either way, through both commit paths.
    store = await new_store("r", "other")
    assert await store.tokens("r") == [] and await store.token("r", "r.1") is None
    first = TokenRecord("r.1", "r", "a", TokenStatus.RUNNING)
    await store.commit(Commit("r", tokens=[first]))  # (the short path)
    first.status = TokenStatus.PARKED
    await store.commit(Commit("r", tokens=[first], expect={"r.1": TokenStatus.RUNNING}))
    assert [t.id for t in await store.tokens("r")] == ["r.1"]
    assert await store.token("r", "r.2") is None
    with pytest.raises(StoreConflict, match=r"'r\.2' of run 'r' is missing"):
        await store.commit(Commit("r", expect={"r.2": TokenStatus.RUNNING}))
    second = TokenRecord("r.2", "r", "b", TokenStatus.RUNNING)
    third = TokenRecord("r.3", "r", "c", TokenStatus.DONE)
    await store.commit(Commit("r", tokens=[second]))
    await store.commit(Commit("r", tokens=[third], expect={"r.1": TokenStatus.PARKED}))
    first.status = TokenStatus.DONE
    await store.commit(Commit("r", tokens=[first]))
    assert [(t.id, t.status) for t in await store.tokens("r")] == [
        ("r.1", TokenStatus.DONE),
        ("r.2", TokenStatus.RUNNING),
        ("r.3", TokenStatus.DONE),
    ]
    assert [t.id for t in await store.tokens("r", [TokenStatus.RUNNING])] == ["r.2"]
    found = await store.token("r", "r.2")
    assert found is not None and found.placement == "b"
    with pytest.raises(StoreConflict, match=r"'r\.3' of run 'r' is done, not running"):
        await store.commit(Commit("r", expect={"r.3": TokenStatus.RUNNING}))
    assert await store.tokens("other") == []  # another run's tokens are its own
    with pytest.raises(UnknownRunError):
        await store.tokens("nope")
    with pytest.raises(UnknownRunError):
        await store.token("nope", "r.1")


async def test_due_index_next_due_and_claims_in_batches_in_instant_order() -> None:
    store = await new_store("r", "s")
    await store.commit(Commit("r", due=[DueEntry(t(30), "r", "r.1"), DueEntry(t(10), "r", "r.2")]))
    await store.commit(Commit("s", due=[DueEntry(t(20), "s", "s.1"), DueEntry(t(99), "s", "s.2")]))
    # Writing a new due for a token replaces the old one; clearing drops it.
    await store.commit(Commit("r", due=[DueEntry(t(5), "r", "r.1")], due_cleared=["s.2"]))
    assert await store.next_due() == t(5)
    assert await store.claim_due(t(4)) == []
    first = await store.claim_due(t(25), limit=2)
    assert [(e.token_id, e.when) for e in first] == [("r.1", t(5)), ("r.2", t(10))]
    second = await store.claim_due(t(25), limit=2)
    assert [e.token_id for e in second] == ["s.1"]
    assert await store.next_due() is None


async def test_records_are_copied_in_and_out() -> None:
    store = await new_store("r")
    token = TokenRecord("r.1", "r", "a", TokenStatus.READY, data={"n": 1})
    await store.commit(Commit("r", tokens=[token]))
    token.status = TokenStatus.DONE
    token.data["n"] = 2
    (stored,) = await store.tokens("r")
    assert (stored.status, stored.data) == (TokenStatus.READY, {"n": 1})
    run = await store.get_run("r")
    run.lifecycle = "failed"
    assert (await store.get_run("r")).lifecycle == "pending"


async def test_the_state_comes_out_as_a_copy_flat_or_nested() -> None:
    store = await new_store("flat", "nested")
    flat = await store.get_state("flat")
    flat["k"] = 2
    assert await store.get_state("flat") == {"k": 1}
    await store.commit(Commit("nested", state={"items": [1, {"a": 1}], "n": None}))
    nested = await store.get_state("nested")
    nested["items"][1]["a"] = 2
    nested["items"].append(3)
    assert await store.get_state("nested") == {"k": 1, "items": [1, {"a": 1}], "n": None}


async def test_history_after_a_seq_and_token_filters_by_several_statuses() -> None:
    store = await new_store("r")
    events = [EventRecord(f"e{i}", "r", t(i), data={"i": i}) for i in range(5)]
    await store.commit(Commit("r", events=events[:2]))
    await store.commit(Commit("r", events=events[2:]))
    history = await store.history("r")
    assert [(e.kind, e.seq, e.data) for e in history] == [
        (f"e{i}", i + 1, {"i": i}) for i in range(5)
    ]
    assert [e.seq for e in await store.history("r", after=3)] == [4, 5]
    assert await store.history("r", after=5) == []
    assert await store.history("r", after=9) == []
    await store.commit(
        Commit(
            "r",
            tokens=[
                TokenRecord("r.1", "r", "a", TokenStatus.PARKED),
                TokenRecord("r.2", "r", "b", TokenStatus.DONE),
                TokenRecord("r.3", "r", "c", TokenStatus.WAITING),
            ],
        )
    )
    live = await store.tokens("r", [TokenStatus.PARKED, TokenStatus.WAITING])
    assert [tk.id for tk in live] == ["r.1", "r.3"]
    assert await store.tokens("r", []) == []
    assert len(await store.tokens("r")) == 3


async def test_scatter_progress_anchors_and_token_filters() -> None:
    store = await new_store("r")
    await store.commit(
        Commit(
            "r",
            tokens=[
                TokenRecord("r.1", "r", "a", TokenStatus.WAITING),
                TokenRecord("r.2", "r", "b", TokenStatus.DONE),
            ],
            scatter=[
                ScatterItemRecord("r", "r.1", 2, "done", "ok", 4),
                ScatterItemRecord("r", "r.1", 0, "failed", "error"),
            ],
            anchors=[NodeAnchor("r", "a", None, t(3))],
        )
    )
    assert [i.index for i in await store.scatter_items("r", "r.1")] == [0, 2]
    assert await store.node_anchor("r", "a", None) == t(3)
    assert await store.node_anchor("r", "a", "item") is None
    live = await store.tokens("r", [TokenStatus.WAITING])
    assert [tk.id for tk in live] == ["r.1"]
    assert TokenStatus.WAITING.live and not TokenStatus.DONE.live


async def test_unknown_and_duplicate_runs() -> None:
    store = await new_store("r")
    with pytest.raises(UnknownRunError, match="no run 'nope'"):
        await store.get_run("nope")
    with pytest.raises(UnknownRunError):
        await store.commit(Commit("nope"))
    with pytest.raises(StoreError, match="already exists"):
        await store.create_run(RunRecord("r", "urn:f", "1", "pending", T0), {})
    assert [r.id for r in await store.list_runs("pending")] == ["r"]
    assert await store.list_runs("completed") == []


async def test_records_come_back_as_they_went_in() -> None:
    from flowtide.store import ParkRecord, ParkStatus

    store = MemoryStore()
    run = RunRecord(
        "r",
        "urn:f",
        "1",
        "parked",
        T0,
        deadline=t(60),
        started_at=t(1),
        options={"entrypoint": None, "item": {"sku": "a", "n": [1, {"x": 2}]}},
        resume={"seq": 3, "visits": (("p", 1),), "terminals": (), "outcome": None},
    )
    data = {
        "window": {"anchor": "park", "timeout": 10.0, "deadline": None},
        "fired_timers": (0, 1),
        "armed": [{"0": "soon"}],
        "empty": {},
        "signal": ("not", "a", {"dict": 1}),
    }
    token = TokenRecord(
        "r.1", "r", "p", TokenStatus.PARKED, 2, 3, (("s", 0, 2),), t(10), None, T0, data, 4
    )
    park = ParkRecord("r.1#4", "r", "r.1", "p", 3, 4, t(2), t(10), "k", {"url": "u", "l": [1]})
    event = EventRecord("parked", "r", t(2), "p", 2, "r.1", {"key": "k", "to": ["a"], "d": {}})
    await store.create_run(run, {"s": 1})
    await store.commit(
        Commit(
            "r",
            tokens=[token],
            events=[event],
            parks=[park],
            due=[DueEntry(t(10), "r", "r.1", "timeout"), DueEntry(t(60), "r", "r", "deadline")],
        )
    )
    assert await store.get_run("r") == run
    assert await store.list_runs("parked") == [run]
    assert await store.tokens("r") == [token]
    assert await store.tokens("r", [TokenStatus.RUNNING]) == []
    assert await store.token("r", "r.1") == token
    assert (await store.history("r"))[0].data == event.data
    assert await store.parks(run_id="r", open_only=True) == [park]
    assert await store.parks(key="k", placement="p") == [park]
    assert store.due_entries() == [
        DueEntry(t(10), "r", "r.1", "timeout"),
        DueEntry(t(60), "r", "r", "deadline"),
    ]
    # What comes out is a copy: changing it changes nothing stored.
    (out,) = await store.tokens("r")
    out.data["window"]["anchor"] = "node"
    out.data["armed"][0]["0"] = "later"
    assert await store.tokens("r") == [token]
    park.status = ParkStatus.SIGNALLED
    await store.commit(Commit("r", parks=[park]))
    assert await store.parks(run_id="r", open_only=True) == []
    assert [p.status for p in await store.parks(run_id="r")] == [ParkStatus.SIGNALLED]


async def test_a_parked_run_leaves_the_collector_little_to_walk() -> None:
    """The rows of a parked run hold plain values only, and so does its history (a tuple of its
    events' fields, their data packed): after a collection, the collector no longer tracks any
    of them (only its state, if that holds containers)."""
    import gc

    from flowtide.store import ParkRecord

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
    token = TokenRecord("r.1", "r", "p", TokenStatus.RUNNING, created_at=T0)
    started = [
        EventRecord("run_started", "r", T0, data={"flow": "urn:f", "deadline": None}),
        EventRecord("node_started", "r", T0, "p", 1, "r.1", {"visit": 1, "deadline": None}),
    ]
    await store.create_run(run, {}, Commit("r", tokens=[token], events=started))
    token.status = TokenStatus.PARKED
    token.data["window"] = {"anchor": "park", "deadline": t(10).isoformat()}
    run.lifecycle = "parked"
    run.resume = {"seq": 3, "visits": (("p", 1),), "terminals": (), "outcome": None}
    park = ParkRecord("r.1#1", "r", "r.1", "p", 1, 1, T0, t(10), "k")
    parked = [EventRecord("parked", "r", T0, "p", 1, "r.1", {"key": "k", "park": park.id})]
    await store.commit(
        Commit(
            "r",
            run=run,
            tokens=[token],
            events=parked,
            parks=[park],
            due=[DueEntry(t(10), "r", "r.1", "timeout")],
        )
    )
    for _ in range(4):
        # A collection untracks a tuple whose items are untracked by then: nested ones may
        # take a collection per level.
        gc.collect()
    rows: list[object] = [
        store._runs["r"],
        store._states["r"],
        store._tokens["r"],  # (the run's one token row itself: no container of its own)
        store._parks["r.1#1"],
        store._parks_by_run["r"],
        store._parks_by_key["k"],
        store._due["r.1"],
        *store._due_heap,
    ]
    assert [row for row in rows if gc.is_tracked(row)] == []
    assert not gc.is_tracked(store._history["r"])
    events = await store.history("r")
    assert [e.data for e in events] == [e.data for e in [*started, *parked]]
    assert [e.seq for e in events] == [1, 2, 3]
    # The next event makes it a list again, and every event reads back as it was committed.
    late = EventRecord("signalled", "r", t(1), "p", 1, "r.1", {"output": "ok", "to": ["end"]})
    (stored,) = await store.commit(Commit("r", events=[late]))
    assert stored.seq == 4 and stored.data == late.data
    assert isinstance(store._history["r"], list)
    assert [e.data for e in await store.history("r")] == [e.data for e in [*started, *parked, late]]
    assert [e.data for e in await store.history("r", after=2)] == [parked[0].data, late.data]


async def test_a_history_is_compacted_when_its_run_parks_and_when_it_ends_right_after() -> None:
    # A run that ends without having waited just before keeps its list: packing a short flow's
    # history at its end would cost every such run more than the collector saves.
    import gc

    async def run_to_end(park_first: bool) -> list[Any] | tuple[Any, ...]:
        store = MemoryStore()
        run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
        await store.create_run(run, {})
        step = EventRecord("node_finished", "r", T0, "p", data={"output": "ok", "to": ["q"]})
        await store.commit(Commit("r", events=[step]))
        if park_first:
            run.lifecycle = "parked"
            await store.commit(Commit("r", run=run, events=[EventRecord("parked", "r", T0)]))
            assert isinstance(store._history["r"], tuple)
        run.lifecycle = "completed"
        await store.commit(Commit("r", run=run, events=[EventRecord("run_finished", "r", T0)]))
        assert [e.kind for e in await store.history("r")][-1] == "run_finished"
        return store._history["r"]

    parked_then_ended = await run_to_end(park_first=True)
    for _ in range(4):
        gc.collect()  # nested tuples are untracked one level per collection
    assert isinstance(parked_then_ended, tuple) and not gc.is_tracked(parked_then_ended)
    assert isinstance(await run_to_end(park_first=False), list)


async def test_a_long_history_is_left_as_it_is_when_its_run_parks() -> None:
    # Freezing a long history whole would cost more than the collector spends on it.
    import gc

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
    await store.create_run(run, {})
    steps = [EventRecord("node_finished", "r", t(i), "p", data={"i": i}) for i in range(100)]
    await store.commit(Commit("r", events=steps))
    run.lifecycle = "parked"
    await store.commit(Commit("r", run=run))
    gc.collect()
    history = store._history["r"]
    assert isinstance(history, list)
    assert [e.data for e in await store.history("r")] == [{"i": i} for i in range(100)]


async def test_event_data_holding_containers_is_packed_by_general_commits_and_read_back_whole() -> (
    None
):
    """A run's start, park, signal or end commit (not a plain step's) packs event data that
    holds lists or dicts: the history keeps no tracked item for it, and reading the history (or
    the events the commit returns) gives the data back equal, as new objects."""
    import gc

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
    await store.create_run(run, {})
    timed_out = {"budget": 1.5, "deadline": t(1).isoformat(), "routed": True, "to": ["late"]}
    finished = {"lifecycle": "completed", "outcome": "late", "errors": [], "nested": {"a": [1]}}
    run.lifecycle = "completed"
    stored = await store.commit(
        Commit(
            "r",
            run=run,
            events=[
                EventRecord("node_timed_out", "r", t(1), "p", 1, "r.1", timed_out),
                EventRecord("run_finished", "r", t(1), data=finished),
            ],
        )
    )
    # A plain step's commit keeps the engine's dict as it is (no cost per step).
    step = {"output": "next", "to": ["q"]}
    plain = EventRecord("node_finished", "r", t(2), "p", data=step)
    await store.commit(Commit("r", events=[plain]))
    for _ in range(6):
        gc.collect()
    history = store._history["r"]
    assert [x for x in history if gc.is_tracked(x)] == [step]
    assert [e.data for e in stored] == [timed_out, finished]
    read = await store.history("r")
    assert [e.data for e in read] == [timed_out, finished, step]
    assert read[0].data is not timed_out and type(read[0].data["to"]) is list
    assert read[1].data["nested"] == {"a": [1]}


async def test_an_ended_run_row_keeps_its_result_untracked_and_gives_it_back_whole() -> None:
    """A run's result (its state, errors, warnings, terminals: dicts and lists) is packed in the
    run's row, so the many ended runs a process keeps cost the collector nothing more than their
    history; reading the run gives the result back as it was stored, as new objects."""
    import gc

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
    await store.create_run(run, {})
    result: dict[str, Any] = {
        "run_id": "r",
        "lifecycle": "completed",
        "outcome": "late",
        "state": {"items": [1, {"a": [2, 3]}], "note": "x", "empty": {}, "none": []},
        "errors": [],
        "warnings": [{"message": "m", "at": ["p", 1]}],
        "terminals": ["late"],
        "parked": [],
        "interrupted_at": None,
        "tuple": (1, 2),
    }
    run.lifecycle = "completed"
    run.result = result
    await store.commit(Commit("r", run=run))
    for _ in range(6):
        gc.collect()  # nested tuples are untracked one level per collection
    assert not gc.is_tracked(store._runs["r"])
    got = (await store.get_run("r")).result
    assert got == result
    assert got is not result
    assert got["state"]["items"][1]["a"] is not result["state"]["items"][1]["a"]
    assert type(got["terminals"]) is list and type(got["tuple"]) is tuple
    got["errors"].append("changed")  # a copy: the stored result does not change
    assert (await store.get_run("r")).result == result


async def test_the_due_index_agrees_with_a_plain_model_over_random_operations() -> None:
    # A token's one entry is kept as its heap item, several as a mapping: setting, replacing,
    # dropping, clearing and claiming any mix of purposes must read as one dict per token.
    rng = random.Random(7)
    purposes = ["", "timeout", "timer:1:0", "timer:1:1"]
    for _ in range(30):
        store = await new_store("r")
        model: dict[tuple[str, str], datetime] = {}
        for _ in range(60):
            token = f"r.{rng.randint(1, 3)}"
            purpose = rng.choice(purposes)
            op = rng.random()
            if op < 0.5:
                when = t(rng.randint(0, 40))
                await store.commit(Commit("r", due=[DueEntry(when, "r", token, purpose)]))
                model[(token, purpose)] = when
            elif op < 0.65:
                await store.commit(Commit("r", due_dropped=[(token, purpose)]))
                model.pop((token, purpose), None)
            elif op < 0.75:
                # Cleared, then set again in the same commit (cleared first).
                when = t(rng.randint(0, 40))
                await store.commit(
                    Commit("r", due_cleared=[token], due=[DueEntry(when, "r", token, purpose)])
                )
                model = {k: v for k, v in model.items() if k[0] != token}
                model[(token, purpose)] = when
            elif op < 0.85:
                await store.commit(Commit("r", due_cleared=[token]))
                model = {k: v for k, v in model.items() if k[0] != token}
            else:
                now = t(rng.randint(0, 40))
                limit = rng.randint(1, 4)
                claimed = await store.claim_due(now, limit)
                due = sorted((w, k) for k, w in model.items() if w <= now)
                assert [e.when for e in claimed] == [w for w, _ in due][:limit]
                for e in claimed:
                    assert model.pop((e.token_id, e.purpose)) == e.when
            entries = store.due_entries()
            assert {(e.token_id, e.purpose): e.when for e in entries} == model
            assert len(entries) == len(model)
            assert await store.next_due() == (min(model.values()) if model else None)


async def test_the_events_a_commit_returns_read_like_a_list_of_records() -> None:
    store = await new_store("r")
    await store.commit(Commit("r", events=[EventRecord("a", "r", T0)]))
    token = TokenRecord("r.1", "r", "a", TokenStatus.RUNNING, data={"why": {"n": [1]}})
    events = await store.commit(
        Commit(
            "r",
            tokens=[token],
            state={"x": 1},
            events=[
                EventRecord("b", "r", T0, "a", 1, "r.1", {"k": 1}),
                EventRecord("c", "r", t(1)),
                EventRecord("d", "r", t(2)),
            ],
        )
    )
    assert len(events) == 3 and bool(events)
    assert [e.seq for e in events] == [2, 3, 4]
    assert events[-1] == EventRecord("d", "r", t(2), seq=4)
    assert events[0] == EventRecord("b", "r", T0, "a", 1, "r.1", {"k": 1}, 2)
    assert [e.kind for e in events[1:]] == ["c", "d"]
    with pytest.raises(IndexError):
        events[3]
    with pytest.raises(IndexError):
        events[-4]
    token.data["why"]["n"].append(2)  # the stored token is a copy
    (stored,) = await store.tokens("r")
    assert stored.data == {"why": {"n": [1]}}
    assert await store.get_state("r") == {"k": 1, "x": 1}
    assert list(await store.history("r", after=1)) == list(events)
    assert await store.commit(Commit("r", tokens=[token])) == ()


async def test_a_parked_or_ended_run_is_untracked_by_its_first_young_collection() -> None:
    """Every value a row or a compacted history holds is plain or packed (bytes): the first
    collection of the youngest generation stops tracking them all, so a run that parks or ends
    moves nothing into the older generations (whose collections walk everything in them)."""
    import gc

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": None})
    await store.create_run(run, {"order": {"lines": [{"sku": "A", "qty": 2}]}, "n": 1})
    token = TokenRecord("r.1", "r", "p", TokenStatus.PARKED, created_at=T0)
    token.data["window"] = {"anchor": "park", "deadline": t(10).isoformat(), "timers": [0, 1]}
    run.lifecycle = "parked"
    run.resume = {"seq": 2, "visits": [["p", 1]], "terminals": [], "outcome": None}
    park = ParkRecord("r.1#1", "r", "r.1", "p", 1, 1, T0, t(10), "k", {"url": "u", "l": [1]})
    data = {"key": "k", "to": ["end"], "window": {"timers": [{"at": 1}]}}
    await store.commit(
        Commit(
            "r",
            run=run,
            tokens=[token],
            events=[EventRecord("parked", "r", T0, "p", 1, "r.1", data)],
            parks=[park],
        )
    )
    run.lifecycle = "completed"
    run.result = {"state": {"a": [1, {"b": [2]}]}, "errors": [], "terminals": ["end"]}
    gc.collect(0)
    assert not gc.is_tracked(store._states["r"])  # while it waits
    finished = EventRecord("run_finished", "r", t(1))
    await store.commit(Commit("r", run=run, state={"paid": {"by": "card"}}, events=[finished]))
    gc.collect(0)
    kept = [
        store._runs["r"],
        store._states["r"],
        store._history["r"],
        store._parks["r.1#1"],
        store._tokens["r"],
    ]
    assert [row for row in kept if gc.is_tracked(row)] == []
    assert (await store.get_run("r")).result == run.result
    assert await store.get_state("r") == {
        "order": {"lines": [{"sku": "A", "qty": 2}]},
        "n": 1,
        "paid": {"by": "card"},
    }
    assert (await store.history("r"))[0].data == data
    assert (await store.tokens("r"))[0].data == token.data
    assert (await store.parks(run_id="r"))[0].payload == {"url": "u", "l": [1]}


async def test_a_waiting_runs_state_is_packed_read_as_copies_and_opened_by_a_write() -> None:
    async def parked_with(state: dict[str, Any]) -> MemoryStore:
        store = MemoryStore()
        run = RunRecord("r", "urn:f", "1", "running", T0)
        await store.create_run(run, state)
        run.lifecycle = "parked"
        await store.commit(Commit("r", run=run, events=[EventRecord("parked", "r", T0)]))
        return store

    store = await parked_with({"order": {"lines": [1, 2]}, "seen": {3}, "t": (4, 5)})
    assert isinstance(store._states["r"], bytes)
    first = await store.get_state("r")
    first["order"]["lines"].append("changed by the caller")
    assert await store.get_state("r") == {"order": {"lines": [1, 2]}, "seen": {3}, "t": (4, 5)}
    # The next write opens it again; the change lands on what was kept.
    await store.commit(Commit("r", state={"more": [6]}, state_deleted=["seen"]))
    assert isinstance(store._states["r"], dict)
    assert await store.get_state("r") == {"order": {"lines": [1, 2]}, "t": (4, 5), "more": [6]}
    # Plain values only: nothing for the collector to walk, nothing to pack.
    assert isinstance((await parked_with({"a": 1, "b": "x"}))._states["r"], dict)

    # What pickle refuses stays as it is, and still comes out as a deep copy.
    def local() -> None: ...

    odd = await parked_with({"at": [T0], "f": [local]})
    assert isinstance(odd._states["r"], dict)
    copied = await odd.get_state("r")
    copied["at"].append(T0)
    assert await odd.get_state("r") == {"at": [T0], "f": [local]}


async def test_every_kept_value_comes_back_as_the_type_it_went_in() -> None:
    # A buffer (a bytearray here; an array, a NumPy array) must not come back as plain bytes,
    # wherever the store keeps it: a waiting run's state, a park's payload, a token's data, an
    # event's data, a run's result.
    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0)
    await store.create_run(run, {"blob": bytearray(b"s"), "nested": {"b": [bytearray(b"n")]}})
    token = TokenRecord("r.1", "r", "p", TokenStatus.PARKED, created_at=T0)
    token.data["blob"] = bytearray(b"t")
    park = ParkRecord("r.1#1", "r", "r.1", "p", 1, 1, T0, None, "k", {"blob": bytearray(b"p")})
    run.lifecycle = "parked"
    parked = EventRecord("parked", "r", T0, "p", 1, "r.1", {"blob": [bytearray(b"e")]})
    await store.commit(Commit("r", run=run, tokens=[token], events=[parked], parks=[park]))
    run.lifecycle = "completed"
    run.result = {"state": {"blob": bytearray(b"r")}}
    await store.commit(Commit("r", run=run, events=[EventRecord("run_finished", "r", t(1))]))
    state = await store.get_state("r")
    assert type(state["blob"]) is bytearray and type(state["nested"]["b"][0]) is bytearray
    assert type((await store.tokens("r"))[0].data["blob"]) is bytearray
    assert type((await store.parks(run_id="r"))[0].payload["blob"]) is bytearray
    assert type((await store.history("r"))[0].data["blob"][0]) is bytearray
    result = (await store.get_run("r")).result
    assert result is not None and type(result["state"]["blob"]) is bytearray


async def test_values_pickle_refuses_are_frozen_and_come_back_as_they_went_in() -> None:
    from enum import StrEnum

    class Colour(StrEnum):  # (local: pickle cannot find it again by its name)
        RED = "red"

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "running", T0, options={"entrypoint": "e", "at": T0})
    await store.create_run(run, {})
    token = TokenRecord("r.1", "r", "p", TokenStatus.PARKED, created_at=T0)
    token.data["colour"] = Colour.RED
    park = ParkRecord("r.1#1", "r", "r.1", "p", 1, 1, T0, None, None, b"raw bytes")
    await store.commit(Commit("r", tokens=[token], parks=[park]))
    assert (await store.get_run("r")).options == {"entrypoint": "e", "at": T0}
    (got,) = await store.tokens("r")
    assert got.data == {"colour": Colour.RED} and type(got.data["colour"]) is Colour
    assert (await store.parks(run_id="r"))[0].payload == b"raw bytes"


async def test_waiting_run_reads_what_the_other_reads_give() -> None:
    """The memory store's one-call read agrees with the default, composed of the other reads:
    the run, the token's open park (not a closed one, not another token's), the live tokens,
    the last seq and a copy of the state."""
    from flowtide.store import ParkStatus, Store, WaitingRun

    store = MemoryStore()
    run = RunRecord("r", "urn:f", "1", "parked", T0, options={"entrypoint": None})
    run.resume = {"seq": 2, "visits": [["p", 1]], "terminals": [], "outcome": None}
    await store.create_run(run, {"n": 1, "items": [1, {"a": 2}]})
    parked = TokenRecord("r.1", "r", "p", TokenStatus.PARKED, epoch=2, created_at=T0)
    waiting = TokenRecord("r.2", "r", "q", TokenStatus.WAITING, created_at=T0)
    done = TokenRecord("r.3", "r", "end", TokenStatus.DONE, created_at=T0)
    closed = ParkRecord("r.1#1", "r", "r.1", "p", 1, 1, T0, None, "k")
    closed.status = ParkStatus.SIGNALLED
    open_ = ParkRecord("r.1#2", "r", "r.1", "p", 2, 2, t(1), t(10), "k")
    other = ParkRecord("r.2#1", "r", "r.2", "q", 1, 1, t(1), None, None)
    events = [EventRecord("parked", "r", T0, "p"), EventRecord("parked", "r", t(1), "p")]
    await store.commit(
        Commit("r", tokens=[parked, waiting, done], parks=[closed, open_, other], events=events)
    )

    async def both(run_id: str, token_id: str) -> tuple[WaitingRun, WaitingRun]:
        return (
            await store.waiting_run(run_id, token_id),
            await Store.waiting_run(store, run_id, token_id),
        )

    mine, composed = await both("r", "r.1")
    assert mine == composed
    assert mine.run == run and mine.park == open_ and mine.last_seq == 2
    assert [t.id for t in mine.live] == ["r.1", "r.2"]
    assert mine.state == {"n": 1, "items": [1, {"a": 2}]}
    mine.state["items"][1]["a"] = 3  # a copy
    assert (await store.get_state("r"))["items"][1] == {"a": 2}
    mine, composed = await both("r", "r.3")
    assert mine == composed and mine.park is None
    with pytest.raises(UnknownRunError):
        await store.waiting_run("nope", "nope.1")
    with pytest.raises(UnknownRunError):
        await Store.waiting_run(store, "nope", "nope.1")
