"""Planning and running a long chain: time and peak memory.

Run with ``python benchmarks/bench_plan.py [nodes ...]`` (default: 8,000 and 10,000). Each size
runs in a fresh process, so its peak resident memory (``resource.getrusage``) is its own: a
linear chain of async tasks, built with ``FlowBuilder``, each returning its one output, then
validated and planned, then run once in memory.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext
from flowtide.model import Flow


@node(id="bench:step", outputs=["next"])
async def step(ctx: NodeContext) -> str:
    return "next"


def chain(nodes: int) -> Flow:
    b = FlowBuilder(f"urn:bench:plan-chain:{nodes}")
    for i in range(nodes):
        b.task(f"n{i}", step, {"next": f"n{i + 1}" if i + 1 < nodes else "end"})
    return b.terminal("end").build()


def measure(nodes: int) -> dict[str, float]:
    """Build, plan and run one chain here; seconds for each, and the peak RSS in MB."""
    t0 = time.perf_counter()
    flow = chain(nodes)
    t1 = time.perf_counter()

    async def main() -> float:
        async with Engine(flows=[flow]) as engine:
            engine.plan(flow.id)
            t2 = time.perf_counter()
            result = await engine.run(flow)
            assert result.lifecycle == "completed", result
            return t2

    t2 = asyncio.run(main())
    t3 = time.perf_counter()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return {
        "build_s": t1 - t0,
        "plan_s": t2 - t1,
        "run_s": t3 - t2,
        "peak_mb": peak_kb / 1024,
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
        return
    sizes = [int(a) for a in sys.argv[1:]] or [8_000, 10_000]
    print("| nodes | build (validation included) | plan | run | peak RSS |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True
        )
        m = json.loads(out.stdout)
        print(
            f"| {n:,} | {m['build_s']:.2f} s | {m['plan_s']:.2f} s | {m['run_s']:.2f} s "
            f"| {m['peak_mb']:.0f} MB |"
        )


if __name__ == "__main__":
    main()
