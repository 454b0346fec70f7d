"""Handing a call to a worker thread: its value or error comes back to the loop, and whoever must
hear that the call returned hears it once, after the call has returned, even when the await was
cancelled first. Real threads, ordered by events (no sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest

from flowtide.engine.worker import handoff
from flowtide.engine.worker.nodethreads import NodeThreads


@contextlib.contextmanager
def pooled(size: int) -> Iterator[NodeThreads]:
    pool = NodeThreads(size, "test-handoff")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True)


def test_the_calls_value_comes_back_and_returned_is_heard_once() -> None:
    heard: list[str] = []

    async def main() -> None:
        with pooled(1) as pool:
            value = await handoff.in_thread(pool, lambda: 41 + 1, lambda: heard.append("back"))
        assert value == 42
        assert heard == ["back"]

    asyncio.run(main())


def test_the_calls_error_comes_back() -> None:
    def fails() -> None:
        raise KeyError("nope")

    async def main() -> None:
        with pooled(1) as pool, pytest.raises(KeyError, match="nope"):
            await handoff.in_thread(pool, fails)

    asyncio.run(main())


def test_stop_iteration_comes_back_as_an_error_not_a_hang() -> None:
    def stops() -> None:
        raise StopIteration

    async def main() -> None:
        with pooled(1) as pool, pytest.raises(RuntimeError, match="StopIteration"):
            await handoff.in_thread(pool, stops)

    asyncio.run(main())


def test_a_cancelled_await_hears_of_the_return_only_once_the_call_has_returned() -> None:
    started, release = threading.Event(), threading.Event()
    heard: list[str] = []

    def blocks() -> str:
        started.set()
        release.wait(timeout=60)
        heard.append("returned")
        return "late"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with pooled(1) as pool:
            back = loop.create_future()

            def hear() -> None:
                heard.append("heard")
                back.set_result(None)

            waiting = asyncio.create_task(handoff.in_thread(pool, blocks, hear))
            await loop.run_in_executor(None, started.wait, 60)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert heard == []  # (still running in its thread)
            release.set()
            await back
        assert heard == ["returned", "heard"]

    asyncio.run(main())


def test_a_call_cancelled_before_it_started_never_runs_and_is_heard_of() -> None:
    gate = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with pooled(1) as pool:
            pool.start(lambda: gate.wait(60), lambda _v, _e: None)  # (the next call queues)
            back = loop.create_future()
            waiting = asyncio.create_task(
                handoff.in_thread(pool, lambda: ran.append("ran"), lambda: back.set_result(None))
            )
            await asyncio.sleep(0)  # (let it submit)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await back
            gate.set()
            # The thread meets the withdrawn call before this one (in order), and skips it.
            assert await handoff.in_thread(pool, lambda: "after") == "after"
        assert ran == []

    asyncio.run(main())
