"""Signals to a run another live worker holds: sent through the store, applied and answered by
that worker, which keeps the run (its nodes in flight are not run again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import (
    Engine,
    Lifecycle,
    NodeContext,
    Park,
    RequestPending,
    RunResult,
    SignalReceipt,
    SignalRefused,
)
from flowtide.model import Flow
from flowtide.store import SignalRequest, Store
from tests.engine.engine_helpers import T0, at, freeze, fresh_store, kinds

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

TTL = timedelta(seconds=30)
worked: list[tuple[str, str]] = []
"""(the worker's name in the state, ctx.idempotency_key) of every attempt of ``long_work``."""
gate: list[asyncio.Event] = []
"""What ``long_work`` waits for: the test lets it finish (virtual time may fly meanwhile)."""


@node(outputs=["go"], execution="inline", register=False)
def fork(ctx: NodeContext) -> str:
    return "go"


@node(outputs=["done"], register=False)
async def long_work(ctx: NodeContext) -> str:
    worked.append((ctx.state.get("worker", ""), ctx.idempotency_key))
    await gate[0].wait()
    ctx.state["worked"] = True
    return "done"


@node(outputs=["approved", "rejected"], register=False)
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is None:
        return Park(key=f"approve:{ctx.run_id}")
    return "approved" if ctx.signal.get("ok") else "rejected"


def two_branches(**ask_settings: Any) -> Flow:
    """``work`` runs a long node while ``ask`` waits parked; both join before the end."""
    return (
        FlowBuilder("urn:test:flow:inbox")
        .task("fork", fork, {"go": ["work", "ask"]})
        .task("work", long_work, {"done": "j"})
        .task("ask", ask, {"approved": "j", "rejected": "j", "timeout": "j"}, **ask_settings)
        .join("j", "all", {"success": "end"})
        .terminal("end")
        .build()
    )


@asynccontextmanager
async def worker_and_client(
    autojump: bool = True, flow: Flow | None = None
) -> AsyncIterator[tuple[Engine, Engine, Store, VirtualClock]]:
    worked.clear()
    gate[:] = [asyncio.Event()]
    clock = VirtualClock(T0, autojump=autojump)
    store = fresh_store()
    flow = flow if flow is not None else two_branches()
    worker = Engine(clock=clock, store=store, owner="w", lease_ttl=TTL, flows=[flow])
    client = Engine(
        clock=clock, store=store, owner="client", flows=[flow], executes=False, lease_ttl=TTL
    )
    try:
        yield worker, client, store, clock
    finally:
        gate[0].set()
        await client.close()
        await worker.close()
        await clock.aclose()
        await store.close()


async def started(worker: Engine, store: Store, flow: Flow | None = None) -> str:
    """A run of ``flow`` (:func:`two_branches`) on ``worker``, its ``ask`` branch parked and its
    ``work`` branch at work."""
    handle = await worker.start(flow or two_branches(), {"worker": "w"})
    await until(lambda: _at_work(store, handle.run_id))
    return handle.run_id


async def _at_work(store: Store, run_id: str) -> bool:
    return bool(worked) and bool(await store.parks(run_id=run_id, open_only=True))


async def until(condition: Callable[[], Awaitable[bool]]) -> None:
    """Once ``condition()`` holds (looked at every millisecond, for at most ten seconds)."""
    for _ in range(10_000):
        if await condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("waited ten seconds in vain")


async def requested(store: Store, run_id: str) -> bool:
    """Whether a signal request of the run waits for its answer (its due entry is stored)."""
    return any(e.purpose == "signal" for e in await store.due_of(run_id))


async def test_a_signal_to_a_run_a_live_worker_holds_is_answered_by_that_worker() -> None:
    async with worker_and_client() as (worker, client, store, _clock):
        run_id = await started(worker, store)
        before = await store.lease_of(run_id)
        receipt = await client.signal(run_id, placement="ask", payload={"ok": True})
        during = await store.lease_of(run_id)
        gate[0].set()  # (answered while the long node still ran)
        result = await client.wait(run_id)
        history = await client.history(run_id)
    assert (receipt.run_id, receipt.placement, receipt.output) == (run_id, "ask", None)
    assert not receipt.duplicate
    # The worker kept its lease (same owner, same epoch) and its node ran once.
    assert before is not None and during is not None
    assert (during.owner, during.epoch) == (before.owner, before.epoch) == ("w", 1)
    assert len(worked) == 1
    assert kinds(history).count("signalled") == 1
    assert [e.placement for e in history if e.kind == "node_started"].count("work") == 1
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["worked"] is True and result.state["ok"] is True


async def test_a_signal_with_an_output_is_answered_by_the_holder_and_repeats_get_the_first() -> (
    None
):
    async with worker_and_client() as (worker, client, store, clock):
        run_id = await started(worker, store)
        receipt = await client.signal(
            key=f"approve:{run_id}", output="rejected", idempotency_key="k1"
        )
        again = await client.signal(
            run_id, placement="ask", output="approved", idempotency_key="k1"
        )
        # A request that reaches the holder after its key was answered: the first answer.
        asked = {"placement": "ask", "idempotency_key": "k1"}
        await store.request_signal(SignalRequest("late", run_id, clock.now(), asked))
        await until(lambda: answered(store, "late"))
        kept = await store.signal_request("late")
        gate[0].set()
        result = await client.wait(run_id)
        history = await client.history(run_id)
    assert (receipt.output, receipt.idempotency_key, receipt.duplicate) == ("rejected", "k1", False)
    assert again == replace(receipt, duplicate=True)
    assert kept is not None and kept.answer == {"accepted": _answer(receipt), "duplicate": True}
    assert len(worked) == 1
    assert kinds(history).count("signalled") == 1
    assert result.lifecycle is Lifecycle.COMPLETED


def _answer(receipt: SignalReceipt) -> dict[str, Any]:
    return {
        "run_id": receipt.run_id,
        "token_id": receipt.token_id,
        "placement": receipt.placement,
        "output": receipt.output,
        "at": receipt.at.isoformat(),
        "park": receipt.park,
        "idempotency_key": receipt.idempotency_key,
    }


async def answered(store: Store, request_id: str) -> bool:
    kept = await store.signal_request(request_id)
    return kept is not None and kept.answer is not None


async def refused(engine: Engine, run_id: str, **how: Any) -> SignalRefused:
    with pytest.raises(SignalRefused) as caught:
        await engine.signal(run_id, **how)
    return caught.value


async def test_a_refusal_through_the_holder_is_the_refusal_a_direct_signal_gets() -> None:
    async with worker_and_client() as (worker, client, store, _clock):
        run_id = await started(worker, store)
        for how in (
            {"placement": "ask", "output": "nonsense"},  # not declared
            {"placement": "ask", "output": "timeout"},  # reserved
            {"key": "no-such-key"},
            {"placement": "work"},  # running, not parked
        ):
            sent = await refused(client, run_id, **how)
            direct = await refused(worker, run_id, **how)
            assert (sent.reason, str(sent)) == (direct.reason, str(direct)), how
            assert (sent.run_id, sent.placement, sent.key) == (
                direct.run_id,
                direct.placement,
                direct.key,
            )
        lease = await store.lease_of(run_id)
        assert lease is not None and (lease.owner, lease.epoch) == ("w", 1)
        await client.signal(run_id, placement="ask", payload={"ok": True})
        gate[0].set()
        result = await client.wait(run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert len(worked) == 1


async def test_a_signal_the_holder_finds_expired_is_refused_as_expired() -> None:
    flow = two_branches(timeout="PT50S")
    async with worker_and_client(autojump=False, flow=flow) as (worker, client, store, clock):
        run_id = await started(worker, store, flow)
        # The worker looks at its due entries only when told to here (its sweeper stopped).
        await worker.sweeper.close()
        await clock.advance_to(at(50))  # the park's deadline: nothing fired it yet
        sending = asyncio.ensure_future(client.signal(run_id, placement="ask", payload={}))
        await until(lambda: requested(store, run_id))
        assert not sending.done()
        leases = await store.claim_runs("w", at(50), at(80))
        assert [(lease.owner, lease.epoch) for lease in leases] == [("w", 1)]
        await worker.taking.take(leases, at(50))  # the deadline and the request, as the sweeper
        with pytest.raises(SignalRefused) as caught:
            await sending
        direct = await refused(worker, run_id, placement="ask", payload={})
    assert caught.value.reason == direct.reason == "expired"
    assert caught.value.at == at(50)
    assert len(worked) == 1


async def test_a_request_the_holder_left_unanswered_is_answered_by_who_takes_the_run_over() -> None:
    async with worker_and_client() as (frozen, client, store, clock):
        rescuer = Engine(
            clock=clock, store=store, owner="rescuer", lease_ttl=TTL, flows=[two_branches()]
        )
        try:
            run_id = await started(frozen, store)
            # The holder stops renewing and looking at its due entries (frozen, or cut off).
            await freeze(frozen)
            rescuer.sweeper  # noqa: B018 - another worker looks for work
            receipt = await client.signal(run_id, placement="ask", output="approved", wait=None)
            answered_at = clock.now()
            gate[0].set()
            result = await client.wait(run_id)
            history = await client.history(run_id)
        finally:
            await rescuer.close()
    assert receipt.placement == "ask" and receipt.output == "approved"
    # Answered once the holder's lease expired, by whoever took the run over then.
    assert answered_at >= at(30)
    assert kinds(history).count("signalled") == 1
    assert result.lifecycle is Lifecycle.COMPLETED
    # (The frozen holder's node ran again where the run was taken over.)
    assert len(worked) == 2 and worked[0][1] == worked[1][1]


async def test_a_run_that_ends_before_its_request_is_answered_refuses_it() -> None:
    async with worker_and_client(autojump=False) as (worker, client, store, _clock):
        run_id = await started(worker, store)
        await worker.sweeper.close()  # (nobody fires the request)
        sending = asyncio.ensure_future(client.signal(run_id, placement="ask", payload={}))
        await until(lambda: requested(store, run_id))
        assert await worker.cancel(run_id, "stop")
        with pytest.raises(SignalRefused) as caught:
            await sending
        assert list(await store.due_of(run_id)) == []
    assert caught.value.reason == "cancelled"


async def test_a_live_holder_that_does_not_answer_in_time_leaves_the_request_pending() -> None:
    async with worker_and_client() as (worker, client, store, _clock):
        run_id = await started(worker, store)
        # Alive (it renews its lease) but deaf: it never looks at its due entries.
        await worker.sweeper.close()
        sent = asyncio.get_running_loop().time()
        with pytest.raises(RequestPending) as caught:
            await client.signal(run_id, placement="ask", output="approved", wait=0.3)
        waited = asyncio.get_running_loop().time() - sent
        lease = await store.lease_of(run_id)
        pending = list(await store.pending_requests(run_id))
        with pytest.raises(RequestPending) as at_once:
            await client.cancel(run_id, "no longer needed", wait=0)
        both = list(await store.pending_requests(run_id))
        history = await client.history(run_id)
    pending_ = caught.value
    assert (pending_.run_id, pending_.kind, pending_.waited) == (run_id, "signal", 0.3)
    assert [r.id for r in pending] == [pending_.request_id]
    assert pending[0].request["output"] == "approved"
    assert 0.3 <= waited < 3  # (seconds of real time)
    # Nobody took the run from its live holder.
    assert lease is not None and (lease.owner, lease.epoch) == ("w", 1)
    assert kinds(history).count("signalled") == 0
    assert (at_once.value.kind, at_once.value.waited) == ("cancel", 0)
    assert [r.kind for r in both] == ["signal", "cancel"]
    assert both[1].request["reason"] == "no longer needed"


async def test_a_cancel_of_a_busy_run_is_applied_by_its_holder_and_its_node_never_reruns() -> None:
    async with worker_and_client() as (worker, client, store, _clock):
        other = Engine(clock=_clock, store=store, owner="w2", lease_ttl=TTL, flows=[two_branches()])
        try:
            other.sweeper  # noqa: B018 - a second worker watching for work
            run_id = await started(worker, store)
            before = await store.lease_of(run_id)
            assert await client.cancel(run_id, "no longer needed", sender="ops")
            result = await client.wait(run_id)
            history = await client.history(run_id)
            again = await client.cancel(run_id, "twice")
            pending = list(await store.pending_requests(run_id))
        finally:
            await other.close()
    assert before is not None and (before.owner, before.epoch) == ("w", 1)
    assert result.lifecycle is Lifecycle.CANCELLED
    assert result.errors[0].message == "no longer needed"
    # Who sent the cancel, kept with its request, is in the history and the result.
    assert history[-1].kind == "run_finished" and history[-1].data["sender"] == "ops"
    assert result.interrupted_at is not None and result.interrupted_at.sender == "ops"
    # The long node was cancelled where it ran, and started nowhere again.
    assert len(worked) == 1
    assert [e.placement for e in history if e.kind == "node_started"].count("work") == 1
    assert again is False
    assert pending == []


async def test_a_signal_recorded_before_the_deadline_wins_though_applied_after_it() -> None:
    flow = two_branches(timeout="PT50S")
    async with worker_and_client(autojump=False, flow=flow) as (worker, client, store, clock):
        run_id = await started(worker, store, flow)
        await worker.sweeper.close()  # (nobody looks at the run until told to here)
        parked = (await store.parks(run_id=run_id, open_only=True))[0]
        assert parked.deadline is not None
        await clock.advance_to(parked.deadline - timedelta(milliseconds=1))
        with pytest.raises(RequestPending):
            await client.signal(run_id, placement="ask", output="approved", wait=0)
        await clock.advance_to(parked.deadline + timedelta(seconds=5))
        now = clock.now()
        leases = await store.claim_runs("w", now, now + TTL)
        await worker.taking.take(leases, now)  # the request and the deadline, as its sweeper would
        await until(lambda: _closed(store, run_id))
        (park,) = await store.parks(run_id=run_id)
        gate[0].set()
        history = await client.history(run_id)
    assert park.status == "signalled"
    assert kinds(history).count("signalled") == 1
    assert kinds(history).count("node_timed_out") == 0


async def _closed(store: Store, run_id: str) -> bool:
    return not await store.parks(run_id=run_id, open_only=True)


async def test_a_cancel_the_holder_applies_at_once_records_its_sender() -> None:
    async with worker_and_client() as (worker, _client, store, _clock):
        run_id = await started(worker, store)
        assert await worker.cancel(run_id, sender="alice")
        result = await worker.wait(run_id)
        history = await worker.history(run_id)
    assert result.lifecycle is Lifecycle.CANCELLED and result.errors == ()
    assert history[-1].kind == "run_finished" and history[-1].data["sender"] == "alice"
    assert result.interrupted_at is not None and result.interrupted_at.sender == "alice"
    stored = RunResult.from_dict(result.to_dict())
    assert stored.interrupted_at == result.interrupted_at


async def test_requests_waiting_on_answers_look_at_the_store_once_per_change_together() -> None:
    waiting, changes = 20, 5
    async with worker_and_client(autojump=False) as (worker, client, store, _clock):
        run_id = await started(worker, store)
        await worker.sweeper.close()  # (alive, but nobody answers the requests)
        reads = {"answer": 0, "unanswered": 0}
        watching = [0, 0]  # calls of wait_changed at this instant, and the most at once
        read_answer, read_unanswered = store.signal_request, store.pending_requests
        wait_changed = store.wait_changed

        async def answer(request_id: str) -> SignalRequest | None:
            reads["answer"] += 1
            return await read_answer(request_id)

        async def unanswered(run_id: str) -> Sequence[SignalRequest]:
            reads["unanswered"] += 1
            return await read_unanswered(run_id)

        async def changed(seconds: float, *, wakes_only: bool = False) -> bool:
            watching[0] += 1
            watching[1] = max(watching)
            try:
                return await wait_changed(seconds, wakes_only=wakes_only)
            finally:
                watching[0] -= 1

        store.signal_request, store.pending_requests = answer, unanswered  # type: ignore[method-assign]
        store.wait_changed = changed  # type: ignore[method-assign]
        sending = [
            asyncio.ensure_future(client.signal(run_id, placement="ask", payload={"n": n}))
            for n in range(waiting)
        ]
        try:

            async def all_waiting() -> bool:
                return len(await read_unanswered(run_id)) == waiting and watching[0] > 0

            await until(all_waiting)
            before = dict(reads)
            for n in range(changes):
                looked = reads["answer"] + reads["unanswered"]
                await client.start(two_branches(), {"worker": f"change {n}"})

                async def looked_again(looked: int = looked) -> bool:
                    return reads["answer"] + reads["unanswered"] > looked

                await until(looked_again)
            assert not any(s.done() for s in sending)
        finally:
            for s in sending:
                s.cancel()
            await asyncio.gather(*sending, return_exceptions=True)
    # Each request read its answer once, when sent; after that one watch of the store read the
    # run's unanswered requests once for each change (not each request for itself every time).
    assert before["answer"] == waiting
    assert reads["answer"] == waiting
    assert changes <= reads["unanswered"] - before["unanswered"] <= 2 * changes + 2
    assert watching[1] == 1
