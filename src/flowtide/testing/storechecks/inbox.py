"""Checks of signal requests: signals sent to a run another worker holds, stored with a due
entry that wakes the holder, and answered once by a commit of the run."""

from __future__ import annotations

from typing import Any

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
from flowtide.testing.storechecks.support import at, new_run, raises, run_record, same

ASKED = {"placement": "p1", "payload": {"amount": 3}, "output": None, "key": None}


def request(request_id: str, run_id: str = "r", seconds: float = 5) -> SignalRequest:
    return SignalRequest(request_id, run_id, at(seconds), dict(ASKED))


async def signal_requests_wake_the_runs_holder(store: Store) -> None:
    same(await store.signal_request("q1"), None, "a request never stored")
    await store.create_run(run_record("r"), {}, lease=Lease("r", "w1", 1, at(30)))
    same(await store.next_wake(), at(30), "a held run, nothing due")
    await store.request_signal(request("q1"))
    same(
        await store.signal_request("q1"),
        SignalRequest("q1", "r", at(5), ASKED),
        "a stored request, unanswered",
    )
    same(list(await store.due_of("r")), [DueEntry(at(5), "r", "q1", "signal")], "its due entry")
    same(await store.next_wake(), at(5), "the held run's wake: the request's instant")
    same(list(await store.claim_runs("w2", at(5), at(40))), [], "a claim by another worker")
    same(
        list(await store.claim_runs("w1", at(5), at(40))),
        [Lease("r", "w1", 1, at(40))],
        "the holder's claim, at its epoch",
    )
    await new_run(store, "p", lifecycle="parked")
    await store.request_signal(request("q2", "p", 3))
    same(await store.next_wake(), at(3), "a parked run nobody holds: the request's instant")
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
    same(await store.signal_request("q2"), request("q2", "p", 3), "a request its run outlived")


async def signal_requests_are_answered_once(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    await store.request_signal(request("q1"))
    await store.request_signal(request("q2"))
    await store.request_signal(request("q9", "s"))
    fired = DueEntry(at(5), "r", "q1", "signal")
    answer = {"accepted": {"output": "paid"}}
    await store.commit(
        Commit(
            "r",
            state={"paid": True},
            due_fired=[fired],
            requests_answered=[RequestAnswer("q1", answer, at(6))],
        )
    )
    same(
        await store.signal_request("q1"),
        SignalRequest("q1", "r", at(5), ASKED, answer, at(6)),
        "an answered request",
    )
    same(list(await store.due_of("r")), [request_due("q2")], "the due entries left")
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
    same((await store.signal_request("q1")), request_answered("q1", answer), "the first answer")
    same((await store.signal_request("q2")), request("q2"), "a request refused commits answered")
    same((await store.signal_request("q9")), request("q9", "s"), "another run's request")


def request_due(request_id: str, run_id: str = "r") -> DueEntry:
    return DueEntry(at(5), run_id, request_id, "signal")


def request_answered(request_id: str, answer: dict[str, Any]) -> SignalRequest:
    return SignalRequest(request_id, "r", at(5), ASKED, answer, at(6))
