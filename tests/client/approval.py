"""The flow the client tests use: a review that parks for an approval, with a window."""

from __future__ import annotations

from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import NodeContext, Park
from flowtide.model import Flow

FLOW = "urn:test:flow:client-approval"


@node(outputs=["approved", "rejected"])  # (registered: a worker finds it by its id)
async def review(ctx: NodeContext) -> Any:
    return Park(key=f"review:{ctx.state['order']}", payload={"ask": "approve?"})


def approval(version: str = "1") -> Flow:
    return (
        FlowBuilder(FLOW, version=version)
        .task("review", review, {"approved": "done", "rejected": "refused"}, timeout="PT1H")
        .terminal("done")
        .terminal("refused", "rejected")
        .build()
    )
