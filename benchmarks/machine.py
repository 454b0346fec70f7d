"""How fast this machine runs Python today, so figures from different days can be compared.

The same machine has measured three times slower on one day than on another, so a benchmark's
absolute figures say little without a note of the machine's speed at the time. ``calibrate()``
times a fixed pure-Python workload of the kind the engine does (small objects, dict updates,
calls); a benchmark prints it next to its figures, and ``benchmarks/RESULTS.md`` records it.
"""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial


@dataclass(slots=True)
class _Record:
    key: str
    value: int
    data: dict[str, int]


def _workload(n: int) -> int:
    index: dict[str, _Record] = {}
    total = 0
    for i in range(n):
        key = f"k{i % 1000}"
        record = _Record(key, i, {"i": i})
        index[key] = record
        total += len(record.data) + record.value % 7
    return total


def calibrate(rounds: int = 5, n: int = 100_000) -> float:
    """Milliseconds for the fixed workload (best of ``rounds``; lower is faster)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        _workload(n)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def thread_round_trip(rounds: int = 5, n: int = 2_000) -> float:
    """Microseconds for a bare hand-off from this thread to another and back (median of
    ``rounds``): two threads passing a token through two eventfds (two locks where there is
    no eventfd), as the engine's worker pool wakes its workers and its loop.

    It is the floor under any step that runs a sync node in a worker thread, whatever the engine.
    It depends on the platform more than on the CPU's speed: on a virtual machine whose other
    CPUs are idle, waking a thread on another CPU can cost tens of microseconds, against a few
    when that CPU is busy or both threads share one CPU (``taskset -c 0``).
    """
    give: Callable[[], object]
    take: Callable[[], object]
    give_back: Callable[[], object]
    take_back: Callable[[], object]
    if hasattr(os, "eventfd"):
        there, back = os.eventfd(0), os.eventfd(0)
        give, take = partial(os.eventfd_write, there, 1), partial(os.eventfd_read, there)
        give_back, take_back = partial(os.eventfd_write, back, 1), partial(os.eventfd_read, back)
    else:
        ping, pong = threading.Lock(), threading.Lock()
        ping.acquire()
        pong.acquire()
        give, take, give_back, take_back = ping.release, ping.acquire, pong.release, pong.acquire
    total = rounds * n + n  # the first n are a warm-up

    def other() -> None:
        for _ in range(total):
            take()
            give_back()

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    samples = []
    for i in range(rounds + 1):
        start = time.perf_counter()
        for _ in range(n):
            give()
            take_back()
        if i:
            samples.append((time.perf_counter() - start) / n * 1e6)
    thread.join()
    if hasattr(os, "eventfd"):
        os.close(there)
        os.close(back)
    return statistics.median(samples)


def describe() -> str:
    """One line: CPU, Python, and the calibration figure."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"machine: {cpu}, CPython {platform.python_version()}; "
        f"calibration {calibrate():.1f} ms (lower is faster)"
    )


if __name__ == "__main__":
    print(describe())
