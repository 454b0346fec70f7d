"""Nodes that the ``flowtide run`` tests reference by ``module:attribute``."""

import asyncio
from typing import Any

from flowtide.authoring import node


@node(outputs=["done"], register=False)
def boom(ctx: Any) -> str:
    raise RuntimeError("the card reader is on fire")


@node(outputs=["done"], register=False)
def finish(ctx: Any) -> str:
    ctx.state["finished"] = True
    return "done"


@node(outputs=["done"], register=False)
async def slow(ctx: Any) -> str:
    await asyncio.sleep(3600)  # (stopped long before: a run left while its node runs)
    return "done"
