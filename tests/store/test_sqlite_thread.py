"""The SQLite store's thread: jobs in order, in one thread, each answer back on the loop."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import flowtide
from flowtide.store.sqlite import SQLiteStore
from flowtide.store.sqlite.thread import StoreThread

SOURCE = str(Path(flowtide.__file__).resolve().parent.parent)

WAIT = 10.0


async def test_calls_run_in_order_in_one_thread_and_answer_with_their_value_or_error() -> None:
    thread = StoreThread("flowtide-sqlite-test")
    seen: list[tuple[int, str]] = []

    def job(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        if i == 2:
            raise ValueError("two")
        return i * 10

    try:
        calls = [asyncio.ensure_future(thread.call(partial(job, i))) for i in range(5)]
        answers = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        thread.shutdown()
    assert answers[:2] == [0, 10] and answers[3:] == [30, 40]
    assert isinstance(answers[2], ValueError)
    assert seen == [(i, "flowtide-sqlite-test") for i in range(5)]


async def test_a_call_given_up_before_it_starts_does_not_run() -> None:
    thread = StoreThread("flowtide-sqlite-test")
    go = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(thread.call(lambda: go.wait(WAIT)))
        second = asyncio.ensure_future(thread.call(lambda: ran.append("second")))
        third = asyncio.ensure_future(thread.call(lambda: ran.append("third")))
        await asyncio.sleep(0)  # (each is queued behind the first, which blocks the thread)
        second.cancel()
        go.set()
        assert await first is True
        await third
        with pytest.raises(asyncio.CancelledError):
            await second
    finally:
        thread.shutdown()
    assert ran == ["third"]


async def test_a_failing_job_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    thread = StoreThread("flowtide-sqlite-test")

    def fails() -> None:
        raise RuntimeError("lost")

    try:
        with caplog.at_level(logging.ERROR, logger="flowtide.store"):
            thread.post(fails)
            assert await thread.call(lambda: "after") == "after"
    finally:
        thread.shutdown()
    assert "failed" in caplog.text


async def test_stop_iteration_in_a_job_comes_back_as_an_error_not_a_hang() -> None:
    """(A future cannot hold StopIteration: the answer is a RuntimeError, as a node's is.)"""
    thread = StoreThread("flowtide-sqlite-test")

    def stops() -> None:
        raise StopIteration

    try:
        with pytest.raises(RuntimeError, match="StopIteration"):
            await thread.call(stops)
        assert await thread.call(lambda: "after") == "after"
    finally:
        thread.shutdown()


async def test_shutdown_ends_the_thread_once_the_jobs_given_before_have_run() -> None:
    thread = StoreThread("flowtide-sqlite-ending")
    ran: list[int] = []
    await thread.call(lambda: None)
    [worker] = [t for t in threading.enumerate() if t.name == "flowtide-sqlite-ending"]
    for i in range(3):
        thread.post(partial(ran.append, i))
    thread.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        thread.post(partial(ran.append, 3))
    await asyncio.to_thread(worker.join, WAIT)
    assert not worker.is_alive() and ran == [0, 1, 2]


def test_a_thread_is_started_only_by_its_first_job() -> None:
    before = threading.active_count()
    thread = StoreThread("flowtide-sqlite-test")
    thread.shutdown()
    assert threading.active_count() == before


_NEVER_CLOSED = """
import asyncio, sys
from flowtide.store.sqlite import SQLiteStore
from flowtide.testing.storechecks.support import new_run

async def main() -> None:
    store = SQLiteStore(sys.argv[1])
    await new_run(store, "r", state={"kept": 1})

asyncio.run(main())
print("exiting")
"""


def test_a_process_whose_store_was_never_closed_exits_with_its_writes_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SOURCE, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _NEVER_CLOSED, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exiting"

    async def read() -> Any:
        async with SQLiteStore(path) as store:
            return await store.get_state("r")

    assert asyncio.run(read()) == {"kept": 1}
