"""What handing a sync node's code to a worker thread costs, part by part, and whether a threaded
chain step costs no more than an inline one plus that hand-off. Run with
``PYTHONPATH=src python benchmarks/bench_handoff.py`` (``--help`` for the options).

How it measures (each figure the median of ``--runs`` samples; CPU time is the process's, every
thread's, so that a wake-up is counted on both sides; wall time beside it):

- ``inline call``: a no-op sync function called from a coroutine on the loop (the floor of an
  inline node's code).
- ``hand-off``: the same no-op handed to the engine's worker threads and awaited from the loop
  (:func:`flowtide.engine.worker.handoff.in_thread`), one after another: one wake-up of a worker
  thread and one of the loop per call.
- ``thread wake-up per job``: :class:`~flowtide.engine.worker.nodethreads.NodeThreads` alone,
  from a plain thread (no loop): a job handed over, its ``done`` awaited on a lock.
- ``loop wake-up per answer``: :class:`flowtide.threads.Reply` alone: a plain thread answers
  replies the loop awaits, one at a time (each answer wakes the loop) and then ``--batch`` at a
  time (answers given together wake it once).
- ``chain step``: the 200-node in-memory chain of ``bench_engine.py``, inline and threaded,
  against inline + hand-off.
- ``Python calls``: cProfile's count per hand-off, per chain step, and per node of the 100-branch
  split joined by an ``all`` join (where answers arrive together), in the loop's thread and in
  the worker threads (load-independent, unlike the times).

The machine's two CPUs are shared: times move with the load (printed beside them); the call
counts do not.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import bench_engine
from machine import describe, thread_round_trip

from flowtide.engine import Engine
from flowtide.engine.worker import handoff, nodethreads
from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.threads import Reply

CALLS = 2_000


def noop() -> None:
    return None


def measured(runs: int, per: int, once: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """CPU and wall microseconds per unit of ``once()`` (``per`` units each)."""

    async def main() -> tuple[float, float]:
        await once()  # warm up
        cpu, wall = [], []
        for _ in range(runs):
            c, w = time.process_time(), time.perf_counter()
            await once()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
        return statistics.median(cpu) / per * 1e6, statistics.median(wall) / per * 1e6

    return asyncio.run(main())


def inline_calls(runs: int) -> tuple[float, float]:
    async def once() -> None:
        for _ in range(CALLS):
            noop()

    return measured(runs, CALLS, once)


def handoffs(runs: int) -> tuple[float, float]:
    pool = NodeThreads(4, "bench-node")

    async def once() -> None:
        for _ in range(CALLS):
            await handoff.in_thread(pool, noop)

    try:
        return measured(runs, CALLS, once)
    finally:
        pool.shutdown(wait=True)


def thread_wakeups(runs: int) -> tuple[float, float]:
    """A job handed to the pool from a plain thread, ``done`` awaited on a lock."""
    pool = NodeThreads(1, "bench-node")
    answered = threading.Lock()
    answered.acquire()

    def done(value: Any, error: object) -> None:
        answered.release()

    cpu, wall = [], []
    try:
        for i in range(runs + 1):
            c, w = time.process_time(), time.perf_counter()
            for _ in range(CALLS):
                pool.start(noop, done)
                answered.acquire()
            if i:  # (the first is a warm-up)
                cpu.append(time.process_time() - c)
                wall.append(time.perf_counter() - w)
    finally:
        pool.shutdown(wait=True)
    return statistics.median(cpu) / CALLS * 1e6, statistics.median(wall) / CALLS * 1e6


def loop_wakeups(runs: int, batch: int) -> tuple[float, float]:
    """A plain thread answers ``batch`` replies at a time; the loop awaits each batch. The
    thread's own wake-up (a lock) is counted too: compare batch 1 against ``--batch``."""
    rounds = CALLS // batch

    async def once() -> None:
        loop = asyncio.get_running_loop()
        asked = threading.Lock()
        asked.acquire()
        pending: list[list[Reply[None]]] = []

        def answer() -> None:
            for _ in range(rounds):
                asked.acquire()
                for reply in pending.pop():
                    reply.set_result(None)

        thread = threading.Thread(target=answer)
        thread.start()
        for _ in range(rounds):
            replies: list[Reply[None]] = [Reply(loop) for _ in range(batch)]
            pending.append(replies)
            asked.release()
            for reply in replies:
                await reply.awaited
        thread.join()

    return measured(runs, rounds * batch, once)


def chain_steps(runs: int, kind: str) -> tuple[float, float]:
    return measured(runs, bench_engine.CHAIN, runner("chain", kind))


def calls_per(units: int, make: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """cProfile's Python calls per unit, in the loop's thread and in the worker threads."""
    workers: list[cProfile.Profile] = []
    work = NodeThreads._work

    def profiled(self: NodeThreads, call: nodethreads.Call | None) -> None:
        profile = cProfile.Profile()
        workers.append(profile)
        profile.enable()
        try:
            work(self, call)
        finally:
            profile.disable()

    NodeThreads._work = profiled  # type: ignore[method-assign]

    async def main() -> float:
        await make()  # warm up (the worker threads start here)
        for profile in workers:
            profile.disable()
            profile.clear()
            profile.enable()
        profile = cProfile.Profile()
        profile.enable()
        await make()
        profile.disable()
        for p in workers:
            p.disable()
        return pstats.Stats(profile).total_calls / units  # type: ignore[attr-defined,no-any-return]

    try:
        loop = asyncio.run(main())
    finally:
        NodeThreads._work = work  # type: ignore[method-assign]
    worker = sum(pstats.Stats(p).total_calls for p in workers) / units  # type: ignore[attr-defined]
    return loop, worker


def counts() -> None:
    pool = NodeThreads(4, "bench-node")

    async def handed() -> None:
        for _ in range(CALLS):
            await handoff.in_thread(pool, noop)

    try:
        print_calls("hand-off", calls_per(CALLS, handed))
    finally:
        pool.shutdown(wait=True)
    for kind in ("inline", "thread"):
        print_calls(f"chain step, {kind}", calls_per(bench_engine.CHAIN, runner("chain", kind)))
    branches = bench_engine.BRANCHES + 2
    print_calls("split + join, per node, thread", calls_per(branches, runner("split", "thread")))


def runner(shape: str, kind: str) -> Callable[[], Awaitable[Any]]:
    """One run of ``bench_engine``'s flow of ``shape`` and ``kind`` to its end, on one engine."""
    flow = bench_engine.chain_flow(kind) if shape == "chain" else bench_engine.split_flow(kind)
    engine = Engine(flows=[flow])

    async def run() -> None:
        result = await engine.run(flow)
        assert result.lifecycle == "completed", result

    return run


def print_calls(what: str, figures: tuple[float, float]) -> None:
    loop, worker = figures
    print(f"  {what:<34} {loop:7.1f} on the loop {worker:7.1f} in worker threads", flush=True)


def print_row(what: str, figures: tuple[float, float]) -> None:
    cpu, wall = figures
    print(f"  {what:<34} {cpu:7.1f} µs CPU {wall:7.1f} µs wall", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=8, help="answers given together")
    args = parser.parse_args()
    print(describe(), flush=True)
    print(f"platform: a bare hand-off to another thread and back {thread_round_trip():.1f} µs")
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("per call:")
    print_row("inline call", inline_calls(args.runs))
    handed = handoffs(args.runs)
    print_row("hand-off", handed)
    print_row("thread wake-up per job", thread_wakeups(args.runs))
    print_row("loop wake-up per answer, 1 at a time", loop_wakeups(args.runs, 1))
    print_row(
        f"loop wake-up per answer, {args.batch} at a time", loop_wakeups(args.runs, args.batch)
    )
    print("per chain step:")
    inline = chain_steps(args.runs, "inline")
    print_row("inline", inline)
    print_row("threaded", chain_steps(args.runs, "thread"))
    print_row("inline + hand-off", (inline[0] + handed[0], inline[1] + handed[1]))
    print("Python calls (cProfile):")
    counts()
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
