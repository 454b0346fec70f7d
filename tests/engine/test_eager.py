"""The eager-start primitive: a coroutine's first step runs in the current task; a task takes
over only when it suspends, and a cancel of that task reaches the coroutine wherever it waits."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

import pytest

from flowtide.engine import eager
from flowtide.engine.threads import WorkerPool

WAIT = 10.0

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


async def test_a_coroutine_that_does_not_suspend_runs_at_once_without_a_task() -> None:
    log: list[Any] = []
    me = asyncio.current_task()

    async def quick() -> int:
        log.append(asyncio.current_task() is me)
        return 7

    before = eager.handoffs
    task = eager.start(quick(), asyncio.get_running_loop())
    assert task is None
    assert log == [True]  # ran already, in this task
    assert eager.handoffs == before


async def test_an_exception_of_the_first_step_reaches_the_caller() -> None:
    async def broken() -> None:
        raise ValueError("first step")

    with pytest.raises(ValueError, match="first step"):
        eager.start(broken(), asyncio.get_running_loop())


async def test_a_coroutine_that_suspends_goes_on_in_a_task_of_its_own() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[Any] = []

    async def waits() -> int:
        log.append(("first", asyncio.current_task() is me))
        value = await fut
        log.append(("then", asyncio.current_task() is me))
        await asyncio.sleep(0)  # a bare yield too
        return value + 1

    before = eager.handoffs
    task = eager.start(waits(), loop)
    assert task is not None
    assert eager.handoffs == before + 1
    assert log == [("first", True)]
    await asyncio.sleep(0)
    assert not task.done()
    fut.set_result(41)
    assert await task == 42
    assert log == [("first", True), ("then", False)]


async def test_a_future_done_before_the_task_first_steps_is_still_seen() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()

    async def waits() -> str:
        return await fut

    task = eager.start(waits(), loop)
    assert task is not None
    fut.set_result("early")  # before the task ran at all
    assert await task == "early"


@pytest.mark.parametrize("before_first_step", [True, False])
async def test_a_cancel_of_the_task_reaches_the_coroutine_where_it_waits(
    before_first_step: bool,
) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    observed: list[str] = []

    async def waits() -> None:
        try:
            await fut
        except asyncio.CancelledError:
            observed.append("cancelled")
            raise

    task = eager.start(waits(), loop)
    assert task is not None
    if not before_first_step:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert observed == ["cancelled"]
    assert fut.cancelled()  # as a task's cancel cancels the future it waits on


async def test_a_coroutine_may_swallow_the_cancel_and_finish() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def stubborn() -> str:
        try:
            await fut
        except asyncio.CancelledError:
            return "kept going"
        return "done"

    task = eager.start(stubborn(), loop)
    assert task is not None
    task.cancel()
    assert await task == "kept going"


async def test_the_first_step_runs_in_a_copy_of_the_context_the_task_keeps() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    async def sets() -> str:
        seen.set("branch")
        await fut
        return seen.get()

    async def quick() -> None:
        seen.set("quick")

    assert eager.start(quick(), loop) is None
    task = eager.start(sets(), loop)
    assert task is not None
    assert seen.get() == "unset"  # the caller's context is untouched
    fut.set_result(None)
    assert await task == "branch"


async def test_the_home_task_is_known_during_a_first_step_it_was_given() -> None:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    fut: asyncio.Future[None] = loop.create_future()
    homes: list[object] = []

    async def looks() -> None:
        homes.append(eager.home)
        await fut
        homes.append(eager.home)  # in its own task now: nobody told it

    task = eager.start(looks(), loop, me)
    assert eager.home is None
    assert task is not None
    fut.set_result(None)
    await task
    assert homes == [me, None]


# -- Carrier: a coroutine driven as a task drives it, compared with a real task -------------------

Driver = Callable[[Coroutine[Any, Any, Any]], "asyncio.Future[Any]"]


def _task(coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_task(coro)


def _carrier(coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    # Its first step where a new task's would run: a loop callback scheduled now.
    loop = asyncio.get_running_loop()
    carrier = eager.Carrier.of(coro, loop)
    loop.call_soon(carrier.start)
    return carrier


async def _outcome(fut: asyncio.Future[Any]) -> tuple[str, Any]:
    try:
        return ("result", await fut)
    except asyncio.CancelledError as exc:
        return ("cancelled", exc.args)
    except Exception as exc:
        return ("raised", repr(exc))


async def _both(scenario: Callable[[Driver], Awaitable[list[Any]]]) -> list[Any]:
    """Run ``scenario`` with a task, then with a carrier: what it observed must be the same."""
    with_task = await scenario(_task)
    with_carrier = await scenario(_carrier)
    assert with_carrier == with_task
    return with_carrier


async def test_a_carrier_gives_its_coroutines_result_through_futures_and_bare_yields() -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        log: list[Any] = []

        async def body() -> int:
            me = asyncio.current_task()
            log.append(("first", me is not None and me is not outer))
            value = await fut
            await asyncio.sleep(0)  # a bare yield: one loop turn
            log.append(("then", asyncio.current_task() is me, me.cancelling()))  # type: ignore[union-attr]
            return value + 1

        outer = asyncio.current_task()
        driven = drive(body())
        await asyncio.sleep(0)
        log.append(("waiting", driven.done()))
        fut.set_result(41)
        log.append(await _outcome(driven))
        return log

    assert await _both(scenario) == [
        ("first", True),
        ("waiting", False),
        ("then", True, 0),
        ("result", 42),
    ]


async def test_a_carrier_is_the_current_task_while_it_steps_and_only_then() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    seen: list[object] = []

    async def body() -> None:
        seen.append(asyncio.current_task())
        await fut
        seen.append(asyncio.current_task())

    carrier = _carrier(body())
    await asyncio.sleep(0)
    assert asyncio.current_task() is not carrier
    fut.set_result(None)
    await carrier
    assert seen == [carrier, carrier]


async def test_an_exception_of_the_coroutine_is_the_carriers() -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        async def body() -> None:
            try:
                await fut
            except KeyError as exc:
                raise ValueError(f"after {exc!r}") from exc

        driven = drive(body())
        await asyncio.sleep(0)
        fut.set_exception(KeyError("k"))
        return [await _outcome(driven)]

    assert await _both(scenario) == [("raised", "ValueError(\"after KeyError('k')\")")]


@pytest.mark.parametrize("when", ["before the first step", "while it waits", "as it is woken"])
async def test_a_carrier_is_cancelled_as_a_task_is(when: str) -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        log: list[Any] = []

        async def body() -> str:
            log.append("started")
            try:
                return await fut
            except asyncio.CancelledError as exc:
                log.append(("observed", exc.args))
                raise

        driven = drive(body())
        if when != "before the first step":
            await asyncio.sleep(0)
        if when == "as it is woken":
            fut.set_result("too late")  # its wake-up is scheduled: the cancel comes first
        log.append(("cancel", driven.cancel(msg="stop")))
        log.append(("cancelling", driven.cancelling()))  # type: ignore[attr-defined]
        log.append(await _outcome(driven))
        log.append(("cancel again", driven.cancel()))
        log.append(("future", fut.cancelled()))
        return log

    log = await _both(scenario)
    if when == "before the first step":
        assert "started" not in log  # a cancelled task's coroutine never runs
    else:
        assert ("observed", ("stop",)) in log


async def test_a_carriers_coroutine_may_swallow_a_cancel_and_uncancel_it() -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        log: list[Any] = []

        async def body() -> str:
            me = asyncio.current_task()
            assert me is not None
            try:
                await fut
            except asyncio.CancelledError:
                log.append(("caught", me.cancelling()))
                log.append(("uncancel", me.uncancel()))
            await asyncio.sleep(0)
            return "kept going"

        driven = drive(body())
        await asyncio.sleep(0)
        driven.cancel()
        log.append(await _outcome(driven))
        return log

    assert await _both(scenario) == [("caught", 1), ("uncancel", 0), ("result", "kept going")]


async def test_asyncio_timeout_works_inside_a_carrier() -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        never: asyncio.Future[None] = loop.create_future()

        async def body() -> str:
            try:
                async with asyncio.timeout(0):
                    await never
            except TimeoutError:
                return "timed out"
            return "not reached"

        return [await _outcome(drive(body()))]

    assert await _both(scenario) == [("result", "timed out")]


async def test_a_carrier_runs_in_its_own_copy_of_the_context() -> None:
    async def scenario(drive: Driver) -> list[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        async def body(name: str) -> str:
            before = seen.get()
            seen.set(name)
            await fut
            return f"{before}->{seen.get()}"

        token = seen.set("caller")
        try:
            one, two = drive(body("one")), drive(body("two"))
        finally:
            seen.reset(token)
        await asyncio.sleep(0)
        fut.set_result(None)
        return [await _outcome(one), await _outcome(two), seen.get()]

    assert await _both(scenario) == [
        ("result", "caller->one"),
        ("result", "caller->two"),
        "unset",
    ]


async def test_a_carrier_waiting_on_the_pool_is_resumed_by_it_or_by_a_cancel() -> None:
    """The pool's future resumes its first waiting carrier itself; other callbacks still run
    after it, and a cancel goes the usual way (the carrier's wake-up, scheduled)."""

    async def scenario(drive: Driver) -> list[Any]:
        pool = WorkerPool(2)
        release = threading.Event()
        log: list[Any] = []
        try:

            async def body(fn: Callable[[int], int], arg: int) -> int:
                fut = pool.submit(fn, arg)
                fut.add_done_callback(lambda f: log.append(("callback", arg)))
                try:
                    return await fut
                except asyncio.CancelledError as exc:
                    log.append(("observed", arg, exc.args))
                    raise

            quick = drive(body(lambda x: x * 2, 21))
            log.append(await _outcome(quick))
            failing = drive(body(lambda x: x // 0, 1))
            log.append(await _outcome(failing))
            blocked = drive(body(lambda x: x if release.wait(WAIT) else -1, 7))
            await asyncio.sleep(0)
            blocked.cancel(msg="enough")
            log.append(await _outcome(blocked))
        finally:
            release.set()
            await asyncio.to_thread(pool.shutdown)
        return log

    log = await _both(scenario)
    assert log[:2] == [("callback", 21), ("result", 42)]
    assert log[-1] == ("cancelled", ("enough",))


async def test_a_carrier_cannot_be_made_to_wait_on_what_is_not_a_future() -> None:
    class Bad:
        def __await__(self) -> Generator[Any, None, None]:
            yield "not a future"

    async def scenario(drive: Driver) -> list[Any]:
        async def body() -> str:
            try:
                await Bad()
            except RuntimeError:
                return "refused"
            return "accepted"

        return [await _outcome(drive(body()))]

    assert await _both(scenario) == [("result", "refused")]


async def test_a_cancel_withdrawn_before_the_first_step_is_as_for_a_task() -> None:
    # Python 3.13 withdraws it (uncancel down to zero); earlier versions still deliver it.
    async def scenario(drive: Driver) -> list[Any]:
        async def body() -> str:
            await asyncio.sleep(0)
            return "ran"

        driven = drive(body())
        driven.cancel()
        return [driven.uncancel(), await _outcome(driven)]  # type: ignore[attr-defined]

    await _both(scenario)


async def test_a_cancel_racing_the_pools_result_is_seen_once_either_way() -> None:
    """The worker posts the result while the carrier is being cancelled, many times: the
    coroutine gets the result or observes the cancel, never both, and nothing is left over."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    pool = WorkerPool(2)
    seen = {"result": 0, "cancelled": 0}
    try:
        for i in range(300):
            observed: list[str] = []
            ran = threading.Event()

            def job(n: int, ran: threading.Event = ran) -> int:
                ran.set()
                return n + 1

            async def body(n: int, observed: list[str] = observed) -> int:
                try:
                    return await pool.submit(job, n)
                except asyncio.CancelledError:
                    observed.append("cancelled")
                    raise

            carrier = _carrier(body(i))
            await asyncio.sleep(0)  # its first step: the job is submitted
            for _ in range(int(WAIT * 10000)):
                if ran.wait(0.0001):  # the job ran; its result is being posted
                    break
                await asyncio.sleep(0)
            for _ in range(i % 3):
                await asyncio.sleep(0)  # the result may be taken meanwhile, or not yet
            carrier.cancel()
            kind, value = await _outcome(carrier)
            seen[kind] += 1
            if kind == "result":
                assert value == i + 1 and observed == []
            else:
                assert observed == ["cancelled"]
            assert carrier.done()
    finally:
        await asyncio.to_thread(pool.shutdown)
    assert errors == []
    assert sum(seen.values()) == 300  # both happen (about 2 cancels to 1 result here)
