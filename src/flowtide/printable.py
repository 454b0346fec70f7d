"""Values shown to people on one line: ids, keys and placements may hold any character, and a
newline or a terminal's escape sequence in one must not forge a log line or a table row."""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str) -> str:
    """``text`` with each character that does not print (control characters such as a newline,
    a tab or ESC, line and paragraph separators, lone surrogates) written as Python writes it
    in a ``repr``: ``a\\nb`` for ``"a" + newline + "b"``. Printable text, any script's letters
    included, is returned as it is."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
