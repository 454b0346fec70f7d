"""The nodes of the crash tests' flow (imported by the worker processes with --nodes)."""

from __future__ import annotations

import asyncio
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
