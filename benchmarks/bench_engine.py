"""Engine overhead per node step: Flowtide vs LangGraph, in memory.

Run with ``python benchmarks/bench_engine.py`` (LangGraph comes with the ``bench`` extra:
``pip install -e '.[bench]'``). Every node does nothing but return its output, so the time per
step is the engine's own overhead: routing, state copy and commit, events, scheduling.

Shapes: a 200-node chain, and a 100-branch split joined by an ``all`` join. Kinds of node:
``async`` (a coroutine on the loop), ``inline`` (sync, on the loop), ``thread`` (sync, in a
worker thread). LangGraph's closest equivalents: async nodes under ``ainvoke``, sync nodes under
``invoke``, sync nodes under ``ainvoke`` (which runs them in the loop's executor).

A threaded step hands the node to another thread and back. What that costs depends on the
platform more than on either engine: on a virtual machine whose other CPU is idle, waking a thread
there can cost tens of microseconds. So when threaded nodes are measured, the benchmark first
prints a bare hand-off between two threads (``machine.thread_round_trip``), and ``--one-cpu``
runs the whole process, both engines alike, on one CPU. Beside the threaded step it measures its
floor, ``hand-off``: a no-op handed to the engine's own pool under a thread slot and awaited from
the loop, exactly as the engine hands a node's code over (so a threaded step should cost no more
than an inline one plus this).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

from machine import describe, thread_round_trip

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext
from flowtide.engine.worker import handoff
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.model import Flow

CHAIN = 200
BRANCHES = 100
CLOCK = [time.perf_counter]
"""What a sample measures: wall time, or with ``--cpu`` the process's CPU time (every thread's)."""


@node(id="bench:async", outputs=["next"])
async def async_step(ctx: NodeContext) -> str:
    return "next"


@node(id="bench:inline", outputs=["next"], execution="inline")
def inline_step(ctx: NodeContext) -> str:
    return "next"


@node(id="bench:thread", outputs=["next"])
def thread_step(ctx: NodeContext) -> str:
    return "next"


KINDS = {"async": async_step, "inline": inline_step, "thread": thread_step}


def chain_flow(kind: str) -> Flow:
    b = FlowBuilder(f"urn:bench:chain:{kind}")
    impl = KINDS[kind]
    for i in range(CHAIN):
        b.task(f"n{i}", impl, {"next": f"n{i + 1}" if i + 1 < CHAIN else "end"})
    return b.terminal("end").build()


def split_flow(kind: str) -> Flow:
    b = FlowBuilder(f"urn:bench:split:{kind}")
    impl = KINDS[kind]
    b.task("fork", inline_step, {"next": [f"b{i}" for i in range(BRANCHES)]})
    for i in range(BRANCHES):
        b.task(f"b{i}", impl, {"next": "join"})
    b.join("join", "all", {"success": "end"})
    return b.terminal("end").build()


def timed(runs: int, once: Callable[[], Awaitable[Any]]) -> list[float]:
    async def main() -> list[float]:
        await once()  # warm up
        samples = []
        for _ in range(runs):
            start = CLOCK[0]()
            await once()
            samples.append(CLOCK[0]() - start)
        return samples

    return asyncio.run(main())


def flowtide_case(shape: str, kind: str, runs: int) -> float:
    flow = chain_flow(kind) if shape == "chain" else split_flow(kind)
    steps = CHAIN if shape == "chain" else BRANCHES + 2
    holder: dict[str, Engine] = {}

    async def once() -> None:
        engine = holder.get("engine")
        if engine is None:
            engine = holder["engine"] = Engine(flows=[flow])
        result = await engine.run(flow)
        assert result.lifecycle == "completed", result

    samples = timed(runs, once)
    return statistics.median(samples) / steps * 1e6


def handoff_floor(runs: int) -> float:
    """Microseconds to hand a no-op to the engine's pool and await it, as a threaded step does:
    take a thread slot, submit, await; the slot goes back when the call returns."""
    per_run = CHAIN

    def noop() -> None:
        return None

    async def main() -> list[float]:
        async with Engine() as engine:
            pool, slots = engine.threads, ThreadSlots(32)

            async def once() -> None:
                for _ in range(per_run):
                    await slots.take()
                    await handoff.in_thread(pool, noop, slots.give)

            await once()  # warm up
            samples = []
            for _ in range(runs):
                start = CLOCK[0]()
                await once()
                samples.append(CLOCK[0]() - start)
            return samples

    return statistics.median(asyncio.run(main())) / per_run * 1e6


class S(TypedDict, total=False):
    x: int


def langgraph_case(shape: str, kind: str, runs: int) -> float | None:
    try:
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        return None

    async def a_node(state: S) -> dict[str, Any]:
        return {}

    def s_node(state: S) -> dict[str, Any]:
        return {}

    fn: Any = a_node if kind == "async" else s_node
    g: Any = StateGraph(S)
    if shape == "chain":
        for i in range(CHAIN):
            g.add_node(f"n{i}", fn)
        g.add_edge(START, "n0")
        for i in range(CHAIN - 1):
            g.add_edge(f"n{i}", f"n{i + 1}")
        g.add_edge(f"n{CHAIN - 1}", END)
        steps = CHAIN
    else:
        g.add_node("fork", s_node)
        g.add_node("join", s_node)
        g.add_edge(START, "fork")
        for i in range(BRANCHES):
            g.add_node(f"b{i}", fn)
            g.add_edge("fork", f"b{i}")
        g.add_edge([f"b{i}" for i in range(BRANCHES)], "join")
        g.add_edge("join", END)
        steps = BRANCHES + 2
    graph = g.compile()
    config = {"recursion_limit": CHAIN + 10}
    if kind == "inline":
        graph.invoke({"x": 0}, config)
        samples = []
        for _ in range(runs):
            start = CLOCK[0]()
            graph.invoke({"x": 0}, config)
            samples.append(CLOCK[0]() - start)
    else:

        async def once() -> None:
            await graph.ainvoke({"x": 0}, config)

        samples = timed(runs, once)
    return statistics.median(samples) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--shapes", nargs="+", choices=("chain", "split"), default=None)
    parser.add_argument("--kinds", nargs="+", choices=tuple(KINDS), default=None)
    parser.add_argument(
        "--one-cpu",
        action="store_true",
        help="run every thread of the process on one CPU (both engines alike): a threaded step "
        "then pays a thread switch instead of a wake-up of another CPU",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="measure the process's CPU time (all its threads) instead of wall time: on a "
        "loaded machine, what a step costs rather than how long it waited for a CPU",
    )
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
    if args.one_cpu:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before any thread starts
    print(describe(), flush=True)
    kinds = args.kinds or tuple(KINDS)
    if "thread" in kinds:
        print(
            f"platform: a bare hand-off to another thread and back takes "
            f"{thread_round_trip():.1f} us (the floor under a threaded step)",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.2f}; per step: {'CPU' if args.cpu else 'wall'} time")
    print(
        f"{'shape':<8} {'nodes':<7} {'flowtide us/step':>17} {'langgraph us/step':>18} {'ratio':>7}"
    )
    for shape in args.shapes or ("chain", "split"):
        for kind in kinds:
            ours = flowtide_case(shape, kind, args.runs)
            theirs = langgraph_case(shape, kind, args.runs)
            ratio = f"{theirs / ours:6.1f}x" if theirs else "   n/a"
            shown = f"{theirs:18.1f}" if theirs else f"{'n/a':>18}"
            print(f"{shape:<8} {kind:<7} {ours:17.1f} {shown} {ratio:>7}", flush=True)
            if kind == "thread":
                floor = handoff_floor(args.runs)
                print(f"{shape:<8} {'hand-off':<7} {floor:17.1f} {'n/a':>18} {'':>7}", flush=True)


if __name__ == "__main__":
    main()
