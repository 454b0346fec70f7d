"""JSON pointers (RFC 6901): the one way Flowtide names a place in a document."""

from __future__ import annotations


def escape(token: object) -> str:
    """One reference token: ``~`` becomes ``~0`` and ``/`` becomes ``~1``."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join(base: str, *tokens: object) -> str:
    """``base`` extended by ``tokens``, each escaped (``join("", "placements", 3)``)."""
    if len(tokens) == 1:  # (most pointers: a state key, a record's field)
        return f"{base}/{escape(tokens[0])}"
    return base + "".join("/" + escape(t) for t in tokens)


def split(pointer: str) -> list[str]:
    """The unescaped tokens of ``pointer`` (``""`` has none)."""
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.lstrip("/").split("/")]
