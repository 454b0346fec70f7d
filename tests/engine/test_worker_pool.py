"""The worker pool of sync nodes: results, exceptions, cancellation, growth, close, races.

Every test runs with the loop woken through an ``eventfd`` (where the platform has one) and
through ``call_soon_threadsafe``. Waits on threads are bounded by generous timeouts: safety nets
against a hang, never timing assertions.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from flowtide.engine.threads import WorkerPool

WAIT = 10.0  # seconds: a safety net, never reached when the code is right


@pytest.fixture(params=[True, False], ids=["eventfd", "threadsafe"])
def use_eventfd(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def gates() -> Iterator[list[threading.Event]]:
    """Events a test's jobs block on; all set at the end, so no worker is left blocked."""
    made: list[threading.Event] = []
    yield made
    for gate in made:
        gate.set()


def gate(gates: list[threading.Event]) -> threading.Event:
    event = threading.Event()
    gates.append(event)
    return event


def double(x: int) -> int:
    return 2 * x


async def test_results_come_back_from_a_worker_thread(use_eventfd: bool) -> None:
    pool = WorkerPool(4, "test-pool", use_eventfd=use_eventfd)
    assert pool.threads == 0  # started lazily
    try:
        assert await pool.submit(double, 21) == 42
        name = await pool.submit(lambda _: threading.current_thread().name, None)
        assert name.startswith("test-pool_")
        assert name != threading.current_thread().name
        assert 1 <= pool.threads <= 4
    finally:
        pool.close()


def fails_here(x: int) -> int:
    raise ValueError(f"bad {x}")


async def test_an_exception_is_raised_with_its_traceback(use_eventfd: bool) -> None:
    pool = WorkerPool(2, use_eventfd=use_eventfd)
    try:
        with pytest.raises(ValueError, match="bad 3") as info:
            await pool.submit(fails_here, 3)
        frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
        assert "fails_here" in frames
        # The pool goes on after a failed job.
        assert await pool.submit(double, 1) == 2
    finally:
        pool.close()


class Stop(BaseException):
    pass


def raises_base(_: Any) -> None:
    raise Stop("not an Exception")


def raises_stop_iteration(_: Any) -> None:
    raise StopIteration


async def test_a_base_exception_is_delivered_and_stop_iteration_is_wrapped(
    use_eventfd: bool,
) -> None:
    pool = WorkerPool(2, use_eventfd=use_eventfd)
    try:
        with pytest.raises(Stop):
            await pool.submit(raises_base, None)
        with pytest.raises(RuntimeError) as info:
            await pool.submit(raises_stop_iteration, None)
        assert isinstance(info.value.__cause__, StopIteration)
    finally:
        pool.close()


async def test_many_concurrent_submissions_all_come_back(use_eventfd: bool) -> None:
    pool = WorkerPool(3, use_eventfd=use_eventfd)
    try:
        results = await asyncio.gather(*(pool.submit(double, i) for i in range(2000)))
        assert results == [2 * i for i in range(2000)]
        assert 1 <= pool.threads <= 3
    finally:
        pool.close()


async def test_a_blocked_worker_does_not_stop_the_other_jobs(
    use_eventfd: bool, gates: list[threading.Event]
) -> None:
    pool = WorkerPool(4, use_eventfd=use_eventfd)
    release = gate(gates)
    try:
        blocked = pool.submit(lambda _: release.wait(WAIT), None)
        # These queue behind the blocked job; the pool must start another worker for them.
        assert await asyncio.gather(*(pool.submit(double, i) for i in range(10))) == [
            2 * i for i in range(10)
        ]
        assert not blocked.done()
        assert pool.threads >= 2
        release.set()
        assert await blocked is True
    finally:
        pool.close()


async def test_workers_grow_up_to_max_threads_only(
    use_eventfd: bool, gates: list[threading.Event]
) -> None:
    pool = WorkerPool(3, use_eventfd=use_eventfd)
    release = gate(gates)
    lock = threading.Lock()
    running: list[int] = [0, 0]  # now, most at once
    three = threading.Barrier(3, timeout=WAIT)

    def job(i: int) -> int:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        if i < 3:
            three.wait()  # the first three run at the same time
        release.wait(WAIT)
        with lock:
            running[0] -= 1
        return i

    try:
        futures = [pool.submit(job, i) for i in range(8)]
        # Once three jobs run together the pool is at its bound: let everything finish.
        await asyncio.to_thread(_wait_until, lambda: running[1] >= 3)
        assert pool.threads == 3
        release.set()
        assert await asyncio.gather(*futures) == list(range(8))
        assert running[1] == 3
        assert pool.threads == 3
    finally:
        pool.close()


def _wait_until(predicate: Any) -> None:
    event = threading.Event()
    for _ in range(int(WAIT * 1000)):
        if predicate():
            return
        event.wait(0.001)
    raise AssertionError("condition not reached")


async def test_a_job_cancelled_before_it_starts_never_runs(
    use_eventfd: bool, gates: list[threading.Event]
) -> None:
    pool = WorkerPool(1, use_eventfd=use_eventfd)
    release = gate(gates)
    ran: list[str] = []
    try:
        first = pool.submit(lambda _: release.wait(WAIT), None)
        queued = pool.submit(lambda _: ran.append("queued"), None)
        queued.cancel()
        release.set()
        assert await first is True
        await pool.submit(lambda _: ran.append("after"), None)
        assert ran == ["after"]
    finally:
        pool.close()


async def test_a_result_arriving_after_a_cancel_is_dropped(
    use_eventfd: bool, gates: list[threading.Event]
) -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    pool = WorkerPool(2, use_eventfd=use_eventfd)
    started = threading.Event()
    release = gate(gates)

    def slow(_: Any) -> str:
        started.set()
        release.wait(WAIT)
        return "late"

    try:
        fut = pool.submit(slow, None)
        await asyncio.to_thread(started.wait, WAIT)
        fut.cancel()
        release.set()
        # The next job's result comes through the same port, after the late one.
        assert await pool.submit(double, 5) == 10
        assert fut.cancelled()
        assert errors == []
    finally:
        pool.close()


async def test_close_does_not_wait_for_a_stuck_worker(use_eventfd: bool) -> None:
    pool = WorkerPool(1, use_eventfd=use_eventfd)
    started = threading.Event()
    release = threading.Event()
    try:

        def stuck(_: Any) -> str:
            started.set()
            release.wait(WAIT)
            return "late"

        fut = pool.submit(stuck, None)
        pending = pool.submit(double, 1)
        await asyncio.to_thread(started.wait, WAIT)
        pool.close()  # returns at once, the worker is still in the node
        assert pool.closed
        assert pending.cancelled()
        with pytest.raises(RuntimeError, match="closed"):
            pool.submit(double, 2)
        await asyncio.sleep(0)
        assert not fut.done()
    finally:
        release.set()
    # Once the node returns, its result still comes (as from an executor after a shutdown),
    # and its worker stops.
    assert await fut == "late"
    await asyncio.to_thread(pool.shutdown, wait=True)
    assert not any(w.thread is not None and w.thread.is_alive() for w in pool._workers)


async def test_shutdown_stops_idle_workers(use_eventfd: bool) -> None:
    pool = WorkerPool(4, use_eventfd=use_eventfd)
    await asyncio.gather(*(pool.submit(double, i) for i in range(20)))
    threads = [w.thread for w in pool._workers]
    await asyncio.to_thread(pool.shutdown, wait=True)
    assert all(t is not None and not t.is_alive() for t in threads)
    pool.close()  # idempotent


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def test_the_callers_context_is_not_copied_into_the_worker(use_eventfd: bool) -> None:
    # As with loop.run_in_executor: the job runs in its worker thread's own context.
    pool = WorkerPool(1, use_eventfd=use_eventfd)
    VAR.set("caller")
    try:
        assert await pool.submit(lambda _: VAR.get(), None) == "unset"
    finally:
        pool.close()


def test_a_pool_serves_one_event_loop_after_another(use_eventfd: bool) -> None:
    pool = WorkerPool(2, use_eventfd=use_eventfd)
    try:
        for i in range(3):
            assert asyncio.run(_submit(pool, i)) == 2 * i
    finally:
        pool.close()


async def _submit(pool: WorkerPool, x: int) -> int:
    return await pool.submit(double, x)


def test_max_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_threads"):
        WorkerPool(0)


async def test_racing_submissions_cancellations_and_completions(use_eventfd: bool) -> None:
    """Many rounds of concurrent submitters (sequences of jobs, some cancelled, some failing,
    some yielding the GIL) against a small pool: every job not cancelled gets exactly its own
    result, no cancelled job's result is applied, and the pool stays within its bound."""
    rng = random.Random(7)
    pool = WorkerPool(3, use_eventfd=use_eventfd)
    sleeper = threading.Event()

    def job(x: int) -> int:
        if x % 7 == 0:
            sleeper.wait(0.0001)  # releases the GIL: other workers and the loop run meanwhile
        if x % 11 == 0:
            raise ValueError(x)
        return x * 3

    async def submitter(base: int, count: int, seed: float) -> list[tuple[int, str]]:
        local = random.Random(seed)
        out: list[tuple[int, str]] = []
        for i in range(count):
            x = base + i
            fut = pool.submit(job, x)
            if local.random() < 0.1:
                fut.cancel()
                out.append((x, "cancelled"))
                continue
            if local.random() < 0.3:
                await asyncio.sleep(0)  # let others submit while this job is in flight
            try:
                out.append((x, str(await fut)))
            except ValueError as exc:
                out.append((x, f"error {exc}"))
        return out

    try:
        for round_ in range(30):
            count = rng.randint(1, 30)
            results = await asyncio.gather(
                *(submitter(1000 * s, count, rng.random()) for s in range(rng.randint(1, 12)))
            )
            for got in results:
                for x, outcome in got:
                    if outcome == "cancelled":
                        continue
                    expected = f"error {x}" if x % 11 == 0 else str(x * 3)
                    assert outcome == expected, (round_, x)
            assert pool.threads <= 3
    finally:
        pool.close()


async def test_closing_while_workers_come_and_go_stops_every_worker(use_eventfd: bool) -> None:
    """Close races with workers taking jobs and going idle: every worker still stops (a worker
    left asleep would make the join hang) and every job not started is cancelled."""
    rng = random.Random(11)
    for _ in range(40):
        pool = WorkerPool(rng.randint(1, 4), use_eventfd=use_eventfd)
        futures = [pool.submit(double, i) for i in range(rng.randint(1, 40))]
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(0)
        pool.close()
        await asyncio.to_thread(pool.shutdown, wait=True)
        await asyncio.sleep(0)
        for i, fut in enumerate(futures):
            assert fut.cancelled() or not fut.done() or fut.result() == 2 * i
            fut.cancel()


async def test_a_chain_of_single_jobs_reuses_one_sleeping_worker(use_eventfd: bool) -> None:
    """One job at a time: the worker goes idle after each and is woken for the next; the
    worker registering itself idle races with the next submission (it takes the job back)."""
    pool = WorkerPool(8, use_eventfd=use_eventfd)
    try:
        for i in range(3000):
            assert await pool.submit(double, i) == 2 * i
        assert pool.threads <= 8
    finally:
        pool.close()


async def test_callbacks_of_a_pending_result_run_when_it_is_resolved(use_eventfd: bool) -> None:
    """Callbacks added while the job runs are called in the callback that takes the result
    (an awaiting task resumes there); added after, or on a cancel, they are scheduled as usual;
    a failing callback goes to the loop's exception handler and the others still run."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    pool = WorkerPool(2, use_eventfd=use_eventfd)
    release = threading.Event()
    seen: list[str] = []

    def broken(_: Any) -> None:
        raise RuntimeError("callback failed")

    def gone(_: Any) -> None:
        seen.append("removed callback ran")

    try:
        fut = pool.submit(lambda _: release.wait(WAIT), None)
        fut.add_done_callback(lambda f: seen.append(f"first {f.result()}"))
        fut.add_done_callback(broken)
        fut.add_done_callback(gone)
        assert fut.remove_done_callback(gone) == 1
        fut.add_done_callback(lambda f: seen.append("last"))
        release.set()
        assert await fut is True
        assert seen == ["first True", "last"]
        assert [str(e["exception"]) for e in errors] == ["callback failed"]
        fut.add_done_callback(lambda f: seen.append("after"))
        await asyncio.sleep(0)
        assert seen[-1] == "after"

        blocker = threading.Event()
        first = pool.submit(lambda _: blocker.wait(WAIT), None)
        cancelled = pool.submit(double, 1)
        cancelled.add_done_callback(lambda f: seen.append(f"cancelled {f.cancelled()}"))
        assert cancelled.cancel()
        await asyncio.sleep(0)
        assert seen[-1] == "cancelled True"
        blocker.set()
        await first
    finally:
        release.set()
        pool.close()


@pytest.mark.parametrize("count", [2, 10])
async def test_a_burst_from_many_tasks_grows_past_a_blocked_worker(
    count: int, use_eventfd: bool, gates: list[threading.Event]
) -> None:
    """Submissions made in one turn of the loop (the branches of a split) wake a worker once,
    after the turn; when that worker is stuck in the first job, the others still run."""
    pool = WorkerPool(4, use_eventfd=use_eventfd)
    release = gate(gates)

    async def one(i: int) -> Any:
        if i == 0:
            return await pool.submit(lambda _: release.wait(WAIT), None)
        return await pool.submit(double, i)

    try:
        tasks = [asyncio.ensure_future(one(i)) for i in range(count)]
        assert await asyncio.gather(*tasks[1:]) == [2 * i for i in range(1, count)]
        assert not tasks[0].done()
        release.set()
        assert await tasks[0] is True
    finally:
        pool.close()
