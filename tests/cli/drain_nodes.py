"""Nodes of the drain tests' flow (``--nodes tests.cli.drain_nodes``): ``slow`` notes each
attempt in the file ``state["log"]`` and ends once the file ``state["gate"]`` exists or
``state["seconds"]`` have passed; ``after`` notes that the run moved on."""

import asyncio
import time
from pathlib import Path
from typing import Any

from flowtide.authoring import node


def note(ctx: Any, what: str) -> None:
    with Path(ctx.state["log"]).open("a") as log:
        log.write(f"{what} {ctx.idempotency_key}\n")


@node(id="test:drain:slow", outputs=["done"])
async def slow(ctx: Any) -> str:
    note(ctx, "started")
    end = time.monotonic() + float(ctx.state["seconds"])
    gate = Path(ctx.state["gate"])
    while time.monotonic() < end and not await asyncio.to_thread(gate.exists):  # noqa: ASYNC110
        await asyncio.sleep(0.02)  # (a file, not an event, opens it: another process writes it)
    note(ctx, "finished")
    return "done"


@node(id="test:drain:after", outputs=["done"])
async def after(ctx: Any) -> str:
    note(ctx, "after")
    return "done"
