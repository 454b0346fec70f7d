"""Nodes imported by reference in the authoring tests."""

from typing import Any

from flowtide.authoring import node


@node(outputs=["ok", "retry"], timeout="PT5S", register=False)
def decorated(ctx: Any) -> str:
    return "ok"


def plain(ctx: Any) -> str:
    return "done"


NOT_CALLABLE = 3
