"""Nodes of the two-branch flow the worker-process signal tests run (a worker registers them
with ``--nodes``; the flow names them by their ids, ``module:attribute``):
``long_work`` notes each attempt in the file ``state["log"]`` and runs until the file
``state["gate"]`` exists; ``ask`` parks until signalled."""

import time
from pathlib import Path
from typing import Any

from flowtide.authoring import node
from flowtide.engine import Park


@node(outputs=["go"], register=False)
def fork(ctx: Any) -> str:
    return "go"


@node(outputs=["done"], register=False)
def long_work(ctx: Any) -> str:
    with Path(ctx.state["log"]).open("a") as log:
        log.write(f"{ctx.idempotency_key}\n")
    while not Path(ctx.state["gate"]).exists():  # (in a worker thread)
        time.sleep(0.02)
    return "done"


@node(outputs=["approved"], parks=True, register=False)
def ask(ctx: Any) -> Any:
    if ctx.signal is None:
        return Park(key=f"ask-{ctx.run_id}")
    return "approved"
