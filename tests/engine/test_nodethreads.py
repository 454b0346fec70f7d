"""The worker threads of sync nodes: each call runs once or is withdrawn and never runs, its
value or error (with its traceback) reaches ``done``, the threads never outnumber the pool's
size and stay alive between calls, and a shutdown drops nothing that ran and leaves no thread
behind. Real threads, ordered by events and locks (no sleeps); waits are safety nets only."""

from __future__ import annotations

import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flowtide.engine.worker.nodethreads import CANCELLED, NodeThreads

WAIT = 30


class Heard:
    """What ``done`` was told, call by call, and an event per call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: dict[int, tuple[Any, object]] = {}
        self.threads: set[str] = set()
        self.all_heard = threading.Event()
        self.expected = 0

    def done(self, tag: int) -> Callable[[Any, object], None]:
        def heard(value: Any, error: object) -> None:
            with self.lock:
                assert tag not in self.outcomes  # (once)
                self.outcomes[tag] = (value, error)
                self.threads.add(threading.current_thread().name)
                if len(self.outcomes) == self.expected:
                    self.all_heard.set()

        return heard


def test_a_value_and_an_error_with_its_traceback_reach_done() -> None:
    pool = NodeThreads(2, "test-pool")
    heard = Heard()
    heard.expected = 2

    def fails() -> None:
        raise KeyError("nope")

    pool.start(lambda: 42, heard.done(0))
    pool.start(fails, heard.done(1))
    assert heard.all_heard.wait(WAIT)
    pool.shutdown(wait=True)
    assert heard.outcomes[0] == (42, None)
    _, error = heard.outcomes[1]
    assert isinstance(error, KeyError)
    frames = [f.name for f in traceback.extract_tb(error.__traceback__)]
    assert frames[-1] == "fails"  # (where it was raised, in the worker thread)
    assert all(name.startswith("test-pool-") for name in heard.threads)
    assert pool.threads == 0


def test_calls_one_after_another_reuse_one_thread() -> None:
    pool = NodeThreads(8)
    names: list[str] = []
    for _ in range(20):
        heard = Heard()
        heard.expected = 1
        pool.start(lambda: None, heard.done(0))
        assert heard.all_heard.wait(WAIT)
        names.extend(heard.threads)
    pool.shutdown(wait=True)
    assert len(set(names)) == 1


def test_the_threads_never_outnumber_the_size_and_extra_calls_wait_in_turn() -> None:
    size, calls = 3, 12
    pool = NodeThreads(size)
    together = threading.Barrier(size, timeout=WAIT)  # (size at a time: no fewer can pass)
    lock = threading.Lock()
    running, most = [0], [0]
    heard = Heard()
    heard.expected = calls

    def work(i: int) -> Callable[[], int]:
        def run() -> int:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            together.wait()
            with lock:
                running[0] -= 1
            return i

        return run

    for i in range(calls):
        pool.start(work(i), heard.done(i))
    assert pool.threads == size
    assert heard.all_heard.wait(WAIT)
    pool.shutdown(wait=True)
    assert most[0] == size
    assert heard.outcomes == {i: (i, None) for i in range(calls)}


def test_a_shutdown_withdraws_queued_calls_lets_busy_ones_finish_and_ends_every_thread() -> None:
    pool = NodeThreads(1, "test-shutdown")
    started, release = threading.Event(), threading.Event()
    heard = Heard()
    heard.expected = 3
    ran = []

    def busy() -> str:
        started.set()
        release.wait(WAIT)
        return "finished"

    pool.start(busy, heard.done(0))
    pool.start(lambda: ran.append(1), heard.done(1))
    pool.start(lambda: ran.append(2), heard.done(2))
    assert started.wait(WAIT)
    pool.shutdown()
    assert heard.outcomes == {1: (None, CANCELLED), 2: (None, CANCELLED)}
    with pytest.raises(RuntimeError, match="shut down"):
        pool.start(int, heard.done(3))
    release.set()
    pool.shutdown(wait=True)  # (waits for the busy thread to end)
    assert heard.outcomes[0] == ("finished", None)  # (not lost)
    assert ran == []
    assert pool.threads == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("test-shutdown")]


@pytest.mark.parametrize("size", [1, 4])
def test_a_withdrawal_racing_the_start_either_wins_or_the_call_runs_once(size: int) -> None:
    """Withdraw each call as a thread may be taking it: a withdrawn call never runs and its
    ``done`` is never called; one not withdrawn runs exactly once and is heard once."""
    pool = NodeThreads(size)
    rounds = 2000
    ran = [0] * rounds
    heard = Heard()
    withdrawn = set()
    for i in range(rounds):

        def call(i: int = i) -> int:
            ran[i] += 1
            return i

        c = pool.start(call, heard.done(i))
        if c.cancel():
            withdrawn.add(i)
    # (A last call, in turn after all of them on one thread: once heard, the rest were met.)
    last = threading.Event()
    pool.start(lambda: None, lambda _v, _e: last.set())
    assert last.wait(WAIT)
    pool.shutdown(wait=True)
    for i in range(rounds):
        if i in withdrawn:
            assert ran[i] == 0 and i not in heard.outcomes
        else:
            assert ran[i] == 1 and heard.outcomes[i] == (i, None)
    assert pool.threads == 0


def test_at_exit_a_pool_never_shut_down_lets_its_busy_call_finish_and_keeps_no_one_waiting(
    tmp_path: Path,
) -> None:
    """The interpreter exits with an idle thread (a daemon: it does not hold the exit up) and a
    busy one (waited for: its call is not cut off)."""
    out = tmp_path / "out.txt"
    script = f"""
import threading, time
from flowtide.engine.worker.nodethreads import NodeThreads

pool = NodeThreads(2)
idle = threading.Event()
pool.start(lambda: None, lambda _v, _e: idle.set())
assert idle.wait(30)
started = threading.Event()

def slow():
    started.set()
    time.sleep(0.3)  # (still running when the main thread is done)
    with open({str(out)!r}, "w") as f:
        f.write("finished")

pool.start(slow, lambda _v, _e: None)
assert started.wait(30)
"""
    ended = subprocess.run([sys.executable, "-c", script], timeout=WAIT * 2, capture_output=True)
    assert ended.returncode == 0, ended.stderr.decode()
    assert out.read_text() == "finished"
