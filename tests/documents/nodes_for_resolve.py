"""Nodes the document tests resolve by the ids they are registered under: ``decorated`` is
registered (``@node``), ``plain`` is a function of the module that is not."""

from typing import Any

from flowtide.authoring import node


@node(outputs=["ok", "retry"])
def decorated(ctx: Any) -> str:
    return "ok"


def plain(ctx: Any) -> str:
    return "done"


NOT_CALLABLE = 3
