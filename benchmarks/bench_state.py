"""What untouched state costs a step: CPU per step with 20 KB of state the nodes never read,
against the same step with empty state, in memory and on SQLite.

Run with ``python benchmarks/bench_state.py``. Each node of a 100-node chain of sync nodes adds 1
to a counter (``ctx.state["n"] += 1``); the run's input is that counter alone, or the counter
and 20 KB of JSON (a list of records, nested as documents are) that no node reads. The figure
is CPU time (``time.process_time``) per step, the median of the runs, so that a disk's flush
and a busy machine's waits are not counted; the goal is a ratio of at most 1.3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import describe

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext
from flowtide.model import Flow
from flowtide.store import MemoryStore, Store
from flowtide.store.sqlite import SQLiteStore

CHAIN = 100


@node(id="bench:count", outputs=["next"], execution="inline")
def count(ctx: NodeContext) -> str:
    ctx.state["n"] += 1
    return "next"


def chain() -> Flow:
    b = FlowBuilder("urn:bench:state-chain")
    for i in range(CHAIN):
        b.task(f"n{i}", count, {"next": f"n{i + 1}" if i + 1 < CHAIN else "end"})
    return b.terminal("end").build()


def documents(size: int = 20_000) -> list[dict[str, Any]]:
    """Records of a few fields, nested as a document's are, about ``size`` bytes as JSON."""
    records: list[dict[str, Any]] = []
    while len(json.dumps(records)) < size:
        i = len(records)
        records.append(
            {
                "id": f"doc-{i:04d}",
                "title": f"Quarterly report {i}",
                "score": i * 0.25,
                "tags": ["finance", "q3", f"team-{i % 7}"],
                "owner": {"name": f"person {i}", "active": i % 2 == 0},
            }
        )
    return records


async def cpu_per_step(store: Store, input: dict[str, Any], runs: int) -> float:
    flow = chain()
    async with Engine(store=store, flows=[flow]) as engine:
        await engine.run(flow, input)  # warm up
        samples = []
        for _ in range(runs):
            start = time.process_time()
            result = await engine.run(flow, input)
            samples.append(time.process_time() - start)
            assert result.state["n"] == input["n"] + CHAIN, result
    return statistics.median(samples) / CHAIN * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(describe())
    folder = Path(tempfile.mkdtemp(prefix="flowtide-bench-"))
    docs = documents()
    print(f"untouched state: {len(json.dumps(docs)):,} bytes as JSON, {len(docs)} records")
    stores: dict[str, Callable[[], Store]] = {
        "memory": MemoryStore,
        "SQLite": lambda: SQLiteStore(folder / f"state-{secrets.token_hex(4)}.db"),
    }
    for name, make in stores.items():
        empty = asyncio.run(cpu_per_step(make(), {"n": 0}, args.runs))
        full = asyncio.run(cpu_per_step(make(), {"n": 0, "docs": docs}, args.runs))
        print(
            f"{name}: CPU per step, empty state {empty:.0f} µs, 20 KB untouched {full:.0f} µs "
            f"({full / empty:.2f}x)"
        )


if __name__ == "__main__":
    main()
