"""The node of ``bench_workers.py``'s chain (imported by the worker processes with --nodes)."""

from __future__ import annotations

from flowtide.authoring import node
from flowtide.engine import NodeContext

STEP = "bench-workers:step"


@node(id=STEP, outputs=["next"])
async def step(ctx: NodeContext) -> str:
    return "next"
