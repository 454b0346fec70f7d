"""One ``INSERT`` for many rows: a named single-row insert (``INSERT ... VALUES (...) ...``)
made into one with a ``VALUES`` tuple per row, and the rows' parameters made into one set.

Each row's parameters are renamed ``<name>__<i>`` (``i``: the row's place), in the placeholder
style of the store that runs it: ``:name`` (SQLite) or ``%(name)s`` (psycopg). A statement for
``n`` rows is made once and kept, so that a database's own statement cache keeps it prepared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, partial
from typing import Any

__all__ = ["ROWS_PER_INSERT", "batches", "many_rows", "row_params"]

ROWS_PER_INSERT = 256
"""The most rows one statement inserts (well under either database's limit of parameters)."""

_VALUES = re.compile(r"\bVALUES\s*\(", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)|%\(([A-Za-z_]\w*)\)s")
"""A named parameter (not a PostgreSQL cast, ``::type``)."""


@cache
def many_rows(statement: str, count: int) -> str:
    """``statement`` (a single-row insert) inserting ``count`` rows, the parameters of row
    ``i`` named ``<name>__<i>``."""
    found = _VALUES.search(statement)
    if found is None:
        raise ValueError(f"not a single-row INSERT ... VALUES (...): {statement[:60]!r}")
    start = found.end() - 1
    end = _closing(statement, start)
    row = statement[start : end + 1]
    rows = ",\n".join(_PLACEHOLDER.sub(partial(_renamed, i=i), row) for i in range(count))
    return statement[:start] + rows + statement[end + 1 :]


def row_params(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The parameters of ``rows`` as one set, for :func:`many_rows` of ``len(rows)``."""
    return {f"{name}__{i}": value for i, row in enumerate(rows) for name, value in row.items()}


def batches(
    rows: Sequence[Mapping[str, Any]], most: int = ROWS_PER_INSERT
) -> Iterator[Sequence[Mapping[str, Any]]]:
    """``rows`` in order, at most ``most`` (:data:`ROWS_PER_INSERT` at most) at a time."""
    most = min(most, ROWS_PER_INSERT)
    for start in range(0, len(rows), most):
        yield rows[start : start + most]


def _renamed(match: re.Match[str], i: int) -> str:
    if match[1] is not None:
        return f":{match[1]}__{i}"
    return f"%({match[2]}__{i})s"


def _closing(text: str, start: int) -> int:
    """The place of the parenthesis that closes the one at ``start``."""
    depth = 0
    for place in range(start, len(text)):
        if text[place] == "(":
            depth += 1
        elif text[place] == ")":
            depth -= 1
            if depth == 0:
                return place
    raise ValueError(f"unbalanced parentheses in {text[:60]!r}")
