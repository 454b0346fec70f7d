"""Checks of commits: all or nothing, compare-and-set, signal keys, state keys, history, runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from flowtide.store.base import (
    Commit,
    DuplicateSignal,
    EventRecord,
    Expect,
    Lease,
    LeaseLost,
    SignalAnswer,
    Store,
    StoreConflict,
    StoreError,
    TokenStatus,
    UnknownRunError,
)
from flowtide.store.jsonvalues import NotJSONError
from flowtide.testing.storechecks.support import (
    T0,
    at,
    every_part,
    new_run,
    on_given_instants,
    raises,
    run_record,
    same,
    same_snapshot,
    seeded_run,
    snapshot,
    token,
    true,
)

P = TokenStatus.PARKED


async def a_commit_applies_every_part(store: Store) -> None:
    await seeded_run(store)
    await store.commit(every_part("r", "a"))
    after = await snapshot(store)
    same(after.run.lifecycle, "lifecycle-a", "the run record written")
    same(after.state, {"set-a": ["a"]}, "the state (a key set, n deleted)")
    same([t.id for t in after.tokens], ["r.1", "r.2", "r.9"], "the tokens")
    same([e.kind for e in after.history], ["seeded", "event-a"], "the history")
    same([p.id for p in after.parks], ["r.2#1", "r.9#1"], "the parks")
    same([a.placement for a in after.anchors], ["anchor-a"], "anchors (kept released)")
    same([i.output for i in after.scatter], ["a"], "the scatter items")
    answer = await store.signal_answer("answer-a")
    same(answer.answer if answer else None, {"by": "a"}, "the signal answer")
    due = await store.due_of("r")
    same([(e.token_id, e.purpose) for e in due], [("r.9", "due-a")], "the due entries")


async def a_refused_commit_applies_nothing(store: Store) -> None:
    """A commit refused for any reason (an expectation, a signal key answered already or given
    twice, a value that is not JSON) leaves every part of the run as it was."""
    on_given_instants(store)
    await seeded_run(store)
    await store.commit(Commit("r", signal_answers=[SignalAnswer("taken", "r", {})]))
    before = await snapshot(store)
    refusals: list[tuple[str, type[Exception], Commit]] = [
        ("an expectation", StoreConflict, replace(every_part("r", "x"), expect={"r.1": P})),
        ("a missing token", StoreConflict, replace(every_part("r", "x"), expect={"r.7": P})),
        (
            "an answered signal key",
            DuplicateSignal,
            replace(every_part("r", "x"), signal_answers=[SignalAnswer("taken", "r", {})]),
        ),
        (
            "a signal key given twice",
            DuplicateSignal,
            replace(
                every_part("r", "x"),
                signal_answers=[SignalAnswer("twice", "r", {}), SignalAnswer("twice", "r", {})],
            ),
        ),
        (
            "a lease the run is not held under",
            LeaseLost,
            replace(every_part("r", "x"), lease=Lease("r", "someone", 1, at(99))),
        ),
        (
            "a value that is not JSON",
            NotJSONError,
            replace(every_part("r", "x"), events=[EventRecord("e", "r", T0, data={"s": {1}})]),
        ),
    ]
    for why, error, commit in refusals:
        with raises(error, f"a commit refused for {why}"):
            await store.commit(commit)
        same_snapshot(await snapshot(store), before, f"after a commit refused for {why}")
        same(await store.signal_answer("answer-x"), None, f"answers after {why}")
        same(await store.signal_answer("twice"), None, f"answers after {why}")
    due = await store.due_of("r")
    same(
        [(e.token_id, e.purpose) for e in due],
        [("r.1", ""), ("r.2", "timeout")],
        "the due entries after the refused commits",
    )


async def create_run_is_all_or_nothing(store: Store) -> None:
    with raises(StoreConflict, "creating a run with a commit whose expectation fails"):
        await store.create_run(
            run_record("r"), {"n": 1}, Commit("r", tokens=[token("r", 1)], expect={"r.1": P})
        )
    with raises(UnknownRunError, "reading a run whose creation was refused"):
        await store.get_run("r")
    with raises(NotJSONError, "creating a run with a state that is not JSON"):
        await store.create_run(run_record("r"), {"bad": {1, 2}})
    with raises(UnknownRunError, "reading a run whose creation was refused"):
        await store.get_run("r")
    created = await store.create_run(
        run_record("r"),
        {"n": 1},
        Commit("r", tokens=[token("r", 1)], events=[EventRecord("started", "r", T0)]),
    )
    same([e.seq for e in created], [1], "the seq of the events created with the run")
    same([t.id for t in await store.tokens("r")], ["r.1"], "the tokens created with the run")
    same(await store.get_state("r"), {"n": 1}, "the state created with the run")
    with raises(StoreError, "creating a run whose id exists"):
        await store.create_run(run_record("r"), {})
    same(await store.get_state("r"), {"n": 1}, "the state after a second creation was refused")


async def compare_and_set_conflicts(store: Store) -> None:
    await new_run(store)
    parked = token("r", 1, P, epoch=3, deadline=at(10))
    await store.commit(Commit("r", tokens=[parked]))
    refused: dict[str, TokenStatus | Expect] = {
        "another status": TokenStatus.RUNNING,
        "another status among several": Expect(frozenset({TokenStatus.RUNNING, TokenStatus.READY})),
        "another epoch": Expect(P, 2),
        "a deadline reached (the deadline wins the tie)": Expect(P, 3, at(10)),
        "a deadline passed": Expect(P, 3, at(11)),
    }
    for why, expect in refused.items():
        with raises(StoreConflict, f"a commit expecting {why}"):
            await store.commit(Commit("r", state={"x": why}, expect={"r.1": expect}))
    same(await store.get_state("r"), {"n": 1}, "the state after refused commits")
    accepted: list[TokenStatus | Expect] = [
        P,
        Expect(frozenset({P, TokenStatus.WAITING}), 3),
        Expect(P, 3, at(9.999)),
    ]
    for expect in accepted:
        await store.commit(Commit("r", expect={"r.1": expect}))
    no_deadline = token("r", 2, P, epoch=1)
    await store.commit(Commit("r", tokens=[no_deadline]))
    await store.commit(Commit("r", expect={"r.2": Expect(P, 1, at(1000))}))
    # Two steps decided against the same token race: the store lets exactly one commit.
    moves = [
        Commit("r", tokens=[token("r", 1, TokenStatus.READY, epoch=4)], state={"won": by})
        for by in ("signal", "timeout")
    ]
    for move in moves:
        move.expect = {"r.1": Expect(P, 3)}
    outcomes = await asyncio.gather(*(store.commit(m) for m in moves), return_exceptions=True)
    conflicts = [o for o in outcomes if isinstance(o, StoreConflict)]
    same(len(conflicts), 1, f"conflicts among two racing commits ({outcomes!r})")
    unexpected = [o for o in outcomes if isinstance(o, BaseException) and o not in conflicts]
    same(unexpected, [], "other errors of two racing commits")
    winner = "signal" if outcomes[0] is not conflicts[0] else "timeout"
    same((await store.get_state("r"))["won"], winner, "the state of the racing commit that won")
    moved = await store.token("r", "r.1")
    same((moved.status, moved.epoch) if moved else None, (TokenStatus.READY, 4), "the moved token")


async def run_lifecycle_conflicts(store: Store) -> None:
    """A commit that expects the run in some lifecycles is refused, whole, when it is not."""
    run = await new_run(store)
    live = frozenset({"pending", "running", "parked"})
    await store.commit(Commit("r", state={"a": 1}, run_lifecycles=live))
    ended = replace(run, lifecycle="completed")
    await store.commit(Commit("r", run=ended, run_lifecycles=live))
    late = Commit(
        "r",
        run=replace(run, lifecycle="failed"),
        tokens=[token("r", 1, TokenStatus.DONE)],
        state={"late": True},
        run_lifecycles=live,
    )
    with raises(StoreConflict, "a commit expecting a live run, on a run that has ended"):
        await store.commit(late)
    same((await store.get_run("r")).lifecycle, "completed", "the run after a refused commit")
    same(await store.get_state("r"), {"n": 1, "a": 1}, "the state after a refused commit")
    same(list(await store.tokens("r")), [], "the tokens after a refused commit")


async def duplicate_signal_keys(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    await store.commit(Commit("r", signal_answers=[SignalAnswer("k", "r", {"n": 1})]))
    with raises(DuplicateSignal, "a second answer to a key") as refused:
        await store.commit(Commit("s", signal_answers=[SignalAnswer("k", "s", {"n": 2})]))
    true(isinstance(refused.error, StoreConflict), "DuplicateSignal is a StoreConflict")
    answer = await store.signal_answer("k")
    same(answer, SignalAnswer("k", "r", {"n": 1}), "the first answer to a key")
    same(await store.signal_answer("other"), None, "the answer to a key never given")


async def unknown_runs(store: Store) -> None:
    await new_run(store)
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "get_run": lambda: store.get_run("nope"),
        "get_state": lambda: store.get_state("nope"),
        "tokens": lambda: store.tokens("nope"),
        "token": lambda: store.token("nope", "nope.1"),
        "history": lambda: store.history("nope"),
        "commit": lambda: store.commit(Commit("nope", state={"x": 1})),
    }
    for name, call in calls.items():
        with raises(UnknownRunError, f"{name} of an unknown run") as refused:
            await call()
        true(isinstance(refused.error, KeyError), f"{name}: UnknownRunError is a KeyError")
        same(getattr(refused.error, "run_id", None), "nope", f"{name}: the error's run id")
    same(await store.get_state("r"), {"n": 1}, "a known run after a commit to an unknown one")


async def state_keys_are_set_and_deleted(store: Store) -> None:
    await new_run(store, state={"keep": 1, "replace": {"a": 1, "b": 2}, "drop": [1]})
    await store.commit(
        Commit("r", state={"replace": {"c": 3}, "new": None}, state_deleted=["drop", "absent"])
    )
    same(
        await store.get_state("r"),
        {"keep": 1, "replace": {"c": 3}, "new": None},
        "the state after top-level keys were set (whole values) and deleted",
    )
    await store.commit(Commit("r", state={}))
    same(len(await store.get_state("r")), 3, "the state after an empty update")


async def history_is_numbered_per_run(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    first = await store.commit(
        Commit("r", events=[EventRecord("a", "r", T0), EventRecord("b", "r", at(1), "p", 2)])
    )
    same([(e.kind, e.seq) for e in first], [("a", 1), ("b", 2)], "the events a commit returns")
    await store.commit(Commit("s", events=[EventRecord("other", "s", T0)]))
    same(await store.commit(Commit("r", state={"x": 1})), [], "a commit without events returns")
    later = await store.commit(Commit("r", events=[EventRecord("c", "r", at(2), token_id="r.1")]))
    same([e.seq for e in later], [3], "the seq of a later commit's event")
    history = await store.history("r")
    same(
        history,
        [
            EventRecord("a", "r", T0, seq=1),
            EventRecord("b", "r", at(1), "p", 2, seq=2),
            EventRecord("c", "r", at(2), token_id="r.1", seq=3),
        ],
        "the history",
    )
    same([e.seq for e in await store.history("s")], [1], "another run's history")
    same([e.seq for e in await store.history("r", after=1)], [2, 3], "the history after 1")
    same(await store.history("r", after=3), [], "the history after its last event")
    same(await store.history("r", after=9), [], "the history after a seq it has not reached")
    same(len(await store.history("r", after=0)), 3, "the history after 0")


async def runs_are_listed_by_lifecycle(store: Store) -> None:
    same(list(await store.list_runs()), [], "the runs of an empty store")
    await new_run(store, "a", lifecycle="running")
    await new_run(store, "b", lifecycle="parked")
    await new_run(store, "c", lifecycle="parked")
    await store.commit(Commit("c", run=run_record("c", "completed")))
    same(sorted(r.id for r in await store.list_runs()), ["a", "b", "c"], "every run")
    same([r.id for r in await store.list_runs("parked")], ["b"], "the parked runs")
    same([r.id for r in await store.list_runs("completed")], ["c"], "the completed runs")
    same(list(await store.list_runs("failed")), [], "runs of a lifecycle none has")
    listed = {r.id: r for r in await store.list_runs()}
    same(listed["b"], await store.get_run("b"), "a listed run and the run read alone")
