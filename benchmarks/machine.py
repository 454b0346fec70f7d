"""How fast this machine runs Python today, so figures from different days can be compared.

The same machine has measured three times slower on one day than on another, so a benchmark's
absolute figures say little without a note of the machine's speed at the time. ``calibrate()``
times a fixed pure-Python workload of the kind the engine does (small objects, dict updates,
calls); a benchmark prints it next to its figures, and ``benchmarks/RESULTS.md`` records it.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass


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
