"""How the PostgreSQL store binds values and gives them back (:data:`DIALECT`); rows are read
into records by the shared decoder (:mod:`flowtide.store.sqlcore.rows`).

What is kept as JSON is encoded with :func:`~flowtide.store.jsonvalues.encode_json`, named by
the same pointers the memory store gives (``run/options``, ``tokens/0/data``, ``state/<key>``,
...), fit for the database (:func:`json_text`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flowtide.store.jsonvalues import encode_json
from flowtide.store.sqlcore.params import Dialect

__all__ = ["DIALECT", "Params", "json_text"]

Params = dict[str, Any]
"""The parameters of one statement, by name."""


# -- records to parameters ------------


def json_text(value: Any, where: str) -> str:
    """``value`` as JSON text (:func:`~flowtide.store.jsonvalues.encode_json`), fit for the
    database: a string holding a lone surrogate (which no UTF-8 text can carry) is written
    with JSON's escapes instead, and reads back the same."""
    text = encode_json(value, where)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
    return text


def _same(value: Any) -> Any:
    return value


def text_array(items: Sequence[str]) -> str:
    """``items`` as the text of a PostgreSQL array (each element quoted), bound as text and cast
    by its statement (``::text[]``): psycopg adapts a list element by element on every call,
    which a profile of many commits a second found to be a fifth of their cost."""
    quoted = ('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
    return "{" + ",".join(quoted) + "}"


DIALECT = Dialect(
    instant=_same,
    json=json_text,
    array=text_array,
    anchor_item=_same,
    duration=_same,
    read_instant=_same,
    read_anchor_item=_same,
)
"""How PostgreSQL takes what the shared statements bind (:mod:`flowtide.store.sqlcore`), and
gives it back: instants as ``timestamptz`` (aware datetimes, in UTC), a list as an array's text, a
span of time as an interval, an anchor's item as it is (its key column is the table's)."""
