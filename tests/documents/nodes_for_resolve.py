"""Nodes the document tests resolve by ``module:attribute``."""

from typing import Any

from flowtide.authoring import node


@node(outputs=["ok", "retry"], register=False)
def decorated(ctx: Any) -> str:
    return "ok"


def plain(ctx: Any) -> str:
    return "done"


NOT_CALLABLE = 3
