"""SQL kept in ``.sql`` files beside the store that runs it: named queries and migrations.

A queries file holds statements, each under a ``-- name: <name>`` line (and an optional comment
saying what it does)::

    -- name: get_run
    -- The run record, by id.
    SELECT ... FROM runs WHERE id = :id;

A migrations folder holds one file per schema version, ``NNNN_what_it_does.sql``, applied in
order; the highest number is the version the code writes. Versions run 1, 2, 3, ... with no gap
and none twice: a missing file would otherwise leave every database without its change.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "COMMIT_QUERIES",
    "PRUNED_TABLES",
    "Migration",
    "load_migrations",
    "load_queries",
    "unapplied",
]

PRUNED_TABLES = (
    "state",
    "tokens",
    "history",
    "due",
    "anchors",
    "parks",
    "signal_answers",
    "signal_requests",
    "scatter_items",
    "runs",
)
"""The tables a run's rows are kept in, in the order a pruned run is deleted from them (its run
last: the others refer to it); each SQL store names a ``prune_<table>`` query for each."""

COMMIT_QUERIES = (
    "advance_run",
    "take_lease",
    "insert_run",
    "write_run",
    "put_token",
    "put_state",
    "delete_state",
    "insert_event",
    "clear_due",
    "drop_due",
    "fire_due",
    "set_due",
    "delete_all_due",
    "delete_due_if_ended",
    "put_anchor",
    "release_anchor",
    "put_scatter_item",
    "put_park",
    "insert_answer",
    "answer_request",
    "wake_due",
    "note_deadline_fired",
    "settle_run",
)
"""The statements a commit is written with, named alike by every SQL store (each store's
``queries.sql`` says them in its dialect), in the order a commit runs them."""

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def load_queries(package: str, filename: str) -> dict[str, str]:
    """The named queries of ``filename`` in ``package``: name -> statement text."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{package}/{filename}: query {name!r} is defined twice")
        statement = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).strip()
        if not statement:
            raise ValueError(f"{package}/{filename}: query {name!r} is empty")
        queries[name] = statement
    return queries


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    """The migrations in ``package`` (a folder of ``NNNN_name.sql`` files), by version: 1, 2,
    3, ... with no gap and no version twice."""
    found = []
    for entry in resources.files(package).iterdir():
        match = _MIGRATION.match(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for before, migration in itertools.pairwise(found):
        if migration.version == before.version:
            raise ValueError(f"{package}: two migrations {migration.version:04d}")
    for expected, migration in enumerate(found, 1):
        if migration.version != expected:
            raise ValueError(f"{package}: migration {expected:04d} is missing")
    return found


def unapplied(migrations: list[Migration], version: int) -> list[Migration]:
    """The migrations a database at schema ``version`` lacks, in order."""
    return [m for m in migrations if m.version > version]
