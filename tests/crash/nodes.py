"""The nodes of the crash tests' flow (imported by the worker processes with --nodes)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from flowtide.authoring import node
from flowtide.engine import NodeContext, Park


@node(id="crash:think", outputs=["done"])
async def think(ctx: NodeContext) -> str:
    await asyncio.sleep(0.01 + (hash(ctx.idempotency_key) % 40) / 1000)
    return "done"


@node(id="crash:block", outputs=["done"])
def block(ctx: NodeContext) -> str:
    time.sleep(0.01)  # a sync node, in a worker thread
    return "done"


@node(id="crash:wait-for-ok", outputs=["approved"], timeout="PT0.3S")
async def wait_for_ok(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        await asyncio.sleep(0.02)  # (a kill may land in a resumed attempt)
        return "approved"
    return Park(key=f"ok-{ctx.run_id}")


@node(id="crash:await-answer", outputs=["answered"], timeout="PT1.5S")
async def await_answer(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "answered"
    return Park(key=f"answer-{ctx.run_id}")


STARTS = "FLOWTIDE_TEST_STARTS"
"""A file each start of ``crash:slow`` is written to (one line: its run id), if set."""


@node(id="crash:slow", outputs=["done"])
async def slow(ctx: NodeContext) -> str:
    """A node that takes a few seconds, and says each time it starts (a run taken from a live
    worker runs it twice)."""
    _started(ctx.run_id)
    await asyncio.sleep(3)
    return "done"


def _started(run_id: str) -> None:
    path = os.environ.get(STARTS)
    if path:
        with open(path, "a", encoding="utf-8") as starts:
            starts.write(f"{run_id}\n")
