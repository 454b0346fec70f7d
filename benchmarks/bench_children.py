"""Parents waiting for a parked subflow child, on SQLite (a file in a temporary directory).

Run with ``python benchmarks/bench_children.py [N]`` (default 100).

* **park**: start N parents one after another (``engine.run``), each of whose subflow child parks
  at once; parents per second until every one is parked. Then what the engine holds: runs in
  memory (``held_runs()``) and the parents' leases in the store.
* **resume**: signal every child (one after another), then wait for every parent's end: each
  child ends, its end wakes its parent, which takes its ``success`` route. Parents per second.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext, Park
from flowtide.store.sqlite import SQLiteStore


@node(outputs=["approved"])
async def ask(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        ctx.state["answer"] = ctx.signal.get("answer")
        return "approved"
    return Park(key=f"k:{ctx.state['order']}")


CHILD = FlowBuilder("urn:bench:child").task("ask", ask, {"approved": "end"}).terminal("end").build()
PARENT = (
    FlowBuilder("urn:bench:parent")
    .subflow("sub", CHILD, {"success": "end"}, output={"answer": "answer"})
    .terminal("end", "done")
    .build()
)


async def main(n: int) -> None:
    store = SQLiteStore(os.path.join(tempfile.mkdtemp(), "bench.db"))
    await store.open()
    engine = Engine(store=store, flows=[PARENT, CHILD])
    try:
        started = time.perf_counter()
        ids = [(await engine.run(PARENT, {"order": i})).run_id for i in range(n)]
        parked = time.perf_counter() - started
        await asyncio.sleep(0.5)  # (a run is seen parked a moment before it is let go)
        held = len(engine.held_runs())
        leases = sum([await store.lease_of(r) is not None for r in ids])
        started = time.perf_counter()
        for i in range(n):
            await engine.signal(key=f"k:{i}", payload={"answer": "yes"})
        for run_id in ids:
            assert (await engine.wait(run_id)).lifecycle.value == "completed"
        resumed = time.perf_counter() - started
    finally:
        await engine.close()
        await store.close()
    print(
        f"N={n}  park: {n / parked:.0f} parents/s  held after: {held} runs, {leases} parent "
        f"leases  resume: {n / resumed:.0f} parents/s"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
