"""Checks of signal requests: signals sent to a run another worker holds, stored with a due
entry that wakes the holder, and answered once by a commit of the run."""

from __future__ import annotations

from datetime import timedelta

from flowtide.store.base import (
    Commit,
    DueEntry,
    Lease,
    RequestAnswer,
    RunEndedError,
    SignalRequest,
    Store,
    StoreConflict,
    StoreError,
    UnknownRunError,
)
from flowtide.store.jsonvalues import NotJSONError
from flowtide.testing.storechecks.support import (
    at,
    new_run,
    on_given_instants,
    raises,
    run_record,
    same,
    true,
)

ASKED = {"placement": "p1", "payload": {"amount": 3}, "output": None, "key": None}


def request(request_id: str, run_id: str = "r", seconds: float = 5) -> SignalRequest:
    return SignalRequest(request_id, run_id, at(seconds), dict(ASKED))


async def signal_requests_wake_the_runs_holder(store: Store) -> None:
    on_given_instants(store)
    same(await store.signal_request("q1"), None, "a request never stored")
    late = at(10**9)
    await store.create_run(run_record("r"), {}, lease=Lease("r", "w1", 1, late))
    same(await store.next_wake(), late, "a held run, nothing due")
    q1 = await store.request_signal(request("q1"))
    when = q1.requested_at  # (the store's instant: its own clock's where it has one)
    true(when >= at(5), "a request is recorded no earlier than the instant given")
    same(q1, SignalRequest("q1", "r", when, ASKED), "the request as stored")
    same(await store.signal_request("q1"), q1, "a stored request, unanswered")
    due = min(when, at(5))  # (the earlier of the instants given and recorded)
    same(list(await store.due_of("r")), [DueEntry(due, "r", "q1", "signal")], "its due entry")
    same(await store.next_wake(), due, "the held run's wake: the request's instant")
    now = when + timedelta(seconds=1)
    same(list(await store.claim_runs("w2", now, late)), [], "a claim by another worker")
    same(
        list(await store.claim_runs("w1", now, late)),
        [Lease("r", "w1", 1, late)],
        "the holder's claim, at its epoch",
    )
    await new_run(store, "p", lifecycle="parked")
    q2 = await store.request_signal(request("q2", "p", 3))
    same(await store.next_wake(), min(due, at(3)), "a parked run nobody holds: its request's")
    with raises(StoreError, "a request whose id is stored already"):
        await store.request_signal(request("q1", "p"))
    with raises(UnknownRunError, "a request for an unknown run"):
        await store.request_signal(request("q3", "nope"))
    with raises(NotJSONError, "a request that is not JSON"):
        await store.request_signal(SignalRequest("q4", "p", at(1), {"payload": {1, 2}}))
    same(await store.signal_request("q4"), None, "a refused request")
    await store.commit(Commit("p", run=run_record("p", "completed")))
    with raises(RunEndedError, "a request for a run that has ended"):
        await store.request_signal(request("q5", "p"))
    same(await store.signal_request("q5"), None, "a request refused for an ended run")
    same(list(await store.due_of("p")), [], "an ended run's due entries, its request's too")
    same(await store.signal_request("q2"), q2, "a request its run outlived")


async def signal_requests_are_answered_once(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    q1 = await store.request_signal(request("q1"))
    q2 = await store.request_signal(request("q2"))
    q9 = await store.request_signal(request("q9", "s"))
    fired = DueEntry(min(q1.requested_at, at(5)), "r", "q1", "signal")
    answer = {"accepted": {"output": "paid"}}
    await store.commit(
        Commit(
            "r",
            state={"paid": True},
            due_fired=[fired],
            requests_answered=[RequestAnswer("q1", answer, at(6))],
        )
    )
    answered = SignalRequest("q1", "r", q1.requested_at, ASKED, answer, at(6))
    same(await store.signal_request("q1"), answered, "an answered request")
    same(
        list(await store.due_of("r")),
        [DueEntry(min(q2.requested_at, at(5)), "r", "q2", "signal")],
        "the due entries left",
    )
    refused = {
        "answering it again": [RequestAnswer("q1", {"again": True}, at(7))],
        "another run's request": [RequestAnswer("q9", {}, at(7))],
        "an unknown request": [RequestAnswer("zz", {}, at(7))],
        "one request twice": [RequestAnswer("q2", {}, at(7)), RequestAnswer("q2", {}, at(7))],
    }
    for what, answers in refused.items():
        with raises(StoreConflict, what):
            await store.commit(Commit("r", state={"n": what}, requests_answered=answers))
    with raises(NotJSONError, "an answer that is not JSON"):
        await store.commit(Commit("r", requests_answered=[RequestAnswer("q2", {"x": {1}}, at(7))]))
    same((await store.get_state("r"))["n"], 1, "the state after refused commits")
    same((await store.signal_request("q1")), answered, "the first answer")
    same((await store.signal_request("q2")), q2, "a request refused commits answered")
    same((await store.signal_request("q9")), q9, "another run's request")


async def pending_requests_are_listed_oldest_first(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    same(list(await store.pending_requests("r")), [], "a run with no request")
    same(list(await store.pending_requests("nope")), [], "an unknown run")
    q1 = await store.request_signal(request("q1", seconds=5))
    cancel = SignalRequest("q2", "r", at(6), {"kind": "cancel", "reason": "no longer needed"})
    q2 = await store.request_signal(cancel)
    q9 = await store.request_signal(request("q9", "s"))
    same(q2.kind, "cancel", "a cancel request's kind")
    same(q1.kind, "signal", "a signal request's kind")
    same(list(await store.pending_requests("r")), [q1, q2], "a run's requests, oldest first")
    await store.commit(Commit("r", requests_answered=[RequestAnswer("q1", {"a": 1}, at(7))]))
    same(list(await store.pending_requests("r")), [q2], "an answered request is not pending")
    await store.commit(Commit("r", run=run_record("r", "cancelled")))
    same(list(await store.pending_requests("r")), [], "an ended run has no pending request")
    same(list(await store.pending_requests("s")), [q9], "another run's requests")


async def a_deadline_waits_for_the_requests_recorded_before_it(store: Store) -> None:
    await new_run(store)
    q1 = await store.request_signal(request("q1"))
    when = q1.requested_at
    just_after = when + timedelta(microseconds=1)
    with raises(StoreConflict, "a deadline fired after an unanswered request recorded before it"):
        await store.commit(Commit("r", state={"n": 2}, fires_deadline=just_after))
    same((await store.get_state("r"))["n"], 1, "the state after the refused firing")
    await store.commit(Commit("r", state={"n": 3}, fires_deadline=when))
    same((await store.get_state("r"))["n"], 3, "a deadline at the request's own instant fires")
    await store.commit(Commit("r", requests_answered=[RequestAnswer("q1", {"a": 1}, when)]))
    await store.commit(Commit("r", state={"n": 4}, fires_deadline=just_after))
    same((await store.get_state("r"))["n"], 4, "a deadline fired once the request is answered")
    await store.commit(Commit("r", fires_deadline=at(100)))
    q2 = await store.request_signal(request("q2", seconds=50))
    true(
        q2.requested_at >= at(100),
        f"a request recorded after a deadline fired at {at(100)} is recorded no earlier "
        f"(got {q2.requested_at})",
    )
