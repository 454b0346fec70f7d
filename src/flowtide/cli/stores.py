"""What the commands that work on stored runs share: the ``--store`` option, opening the store,
an engine on it, and times shown relative to now."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from flowtide.authoring.nodes import NodeRegistry
from flowtide.cli.common import BadInput, escape, out
from flowtide.engine import Engine
from flowtide.store.base import Store, StoreOpenError, UnknownRunError
from flowtide.store.sqlite import SQLiteStore
from flowtide.store.urls import DEFAULT_STORE, is_conninfo, redact, store_for

STORE_VARIABLE = "FLOWTIDE_STORE"

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        "-s",
        metavar="URL",
        envvar=STORE_VARIABLE,
        help="Where runs are kept: sqlite:///path/runs.db (or a plain path), "
        "postgresql://user@host/db (or 'host=... dbname=...'), or memory: (nothing kept).",
        show_default=True,
    ),
]
"""``--store URL`` (or ``FLOWTIDE_STORE``), default a SQLite file in the current directory."""

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]

DEFAULT = DEFAULT_STORE


async def opened(url: str, *, create: bool = True) -> Store:
    """The store ``url`` names, opened; bad input (exit 2, one line, no password) if it cannot
    be. ``create=False`` (for a command that only reads): a SQLite file that does not exist is
    bad input too, and is not created."""
    try:
        store = store_for(url)
        if not create:
            must_exist(store)
        await store.open()
        return store
    except StoreOpenError as exc:
        raise BadInput(str(exc)) from None


def must_exist(store: Store) -> None:
    """Bad input unless the store's database exists (a command that only reads creates none)."""
    if isinstance(store, SQLiteStore) and not Path(store.path).exists():
        raise BadInput(f"no store at {store.path}; start a run first, or name one with --store")


@asynccontextmanager
async def client(
    url: str, *, registry: NodeRegistry | None = None, create: bool = True, **options: Any
) -> AsyncIterator[Engine]:
    """An engine on the store that runs no nodes (a client: workers do), closed at the end
    (``create``: as for :func:`opened`)."""
    store = await opened(url, create=create)
    engine = Engine(store=store, registry=registry, executes=False, **options)
    try:
        yield engine
    finally:
        await engine.close()
        await store.close()


def unknown_run(exc: UnknownRunError, url: str) -> BadInput:
    return BadInput(f"no run {exc.run_id!r} in {shown_store(url)}")


CANDIDATES_SHOWN = 10
"""How many runs an ambiguous run id prefix lists."""


async def resolve_run(store: Store, given: str, url: str) -> str:
    """The id of the run ``given`` names: its whole id, or a prefix of one run's id only (a
    worker's log shows runs by the start of their id). Bad input (exit 2) when no run's id
    starts with it, or more than one's does (they are listed)."""
    try:
        return (await store.get_run(given)).id
    except UnknownRunError:
        pass
    found = list(await store.run_ids(given, limit=CANDIDATES_SHOWN + 1)) if given else []
    if not found:
        raise BadInput(f"no run {given!r} in {shown_store(url)}")
    if len(found) > 1:
        more = ", ..." if len(found) > CANDIDATES_SHOWN else ""
        listed = ", ".join(found[:CANDIDATES_SHOWN]) + more
        raise BadInput(
            f"run {given!r} is ambiguous: the ids of {'more than ' if more else ''}"
            f"{min(len(found), CANDIDATES_SHOWN)} runs start with it ({listed}); give more of it"
        )
    return found[0]


def store_option(url: str) -> str:
    """`` --store URL`` for a command printed to be pasted as it is: nothing for the default
    store, ``--store "$FLOWTIDE_STORE"`` for a URL with a password (never shown) or one that came
    from that variable, else the URL (quoted for a shell when it needs it)."""
    from_environment = os.environ.get(STORE_VARIABLE) == url
    if from_environment or redact(url) != url:
        return f' --store "${STORE_VARIABLE}"'
    if url == DEFAULT:
        return ""
    return f" --store {shlex.quote(url)}"


def store_note(url: str) -> str | None:
    """What to do before pasting a hint whose ``--store "$FLOWTIDE_STORE"`` stands for a URL
    that did not come from that variable (it has a password, never printed), or None."""
    if os.environ.get(STORE_VARIABLE) == url or redact(url) == url:
        return None
    return f"(to paste these, set {STORE_VARIABLE} to the store's URL: its password is not shown)"


def print_table(table: Table) -> None:
    """``table`` on stdout: outside a terminal as wide as its rows (a narrow or absent terminal
    never cuts an id, nor folds it), in a terminal as wide as the terminal."""
    if out.is_terminal:
        out.print(table)
        return
    wide = Console(
        file=out.file, width=UNLIMITED_WIDTH, highlight=False, soft_wrap=True, emoji=False
    )
    wide.print(table)


UNLIMITED_WIDTH = 100_000
"""The width of a table printed outside a terminal: a table takes only what its rows need."""


def event_table(events: list[dict[str, Any]]) -> Table:
    """Events (as :func:`event_json` gives them) as a table, one row each."""
    table = Table("seq", "at", "event", "placement", "attempt", "data")
    for e in events:
        table.add_row(
            str(e["seq"]),
            e["at"],
            e["kind"],
            escape(str(e["placement"] or "")),
            str(e["attempt"] or ""),
            escape(json.dumps(e["data"], default=str)),
        )
    return table


def emit_json(data: Any) -> None:
    """``data`` as JSON on stdout (instants as ISO text)."""
    out.print_json(json.dumps(data, default=_default))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def relative(when: datetime | None, now: datetime) -> str:
    """``in 9m 58s`` / ``2m ago`` (to the second), ``now``, or ``-``."""
    if when is None:
        return "-"
    delta = when - now
    seconds = round(abs(delta.total_seconds()))
    if not seconds:
        return "now"
    text = human(seconds)
    return f"in {text}" if delta > timedelta(0) else f"{text} ago"


def human(seconds: int) -> str:
    """``9m 58s``, ``1h 1m``, ``2d 3h``: the two largest units."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts[:2]) or "0s"


def shown_store(url: str) -> str:
    """The store as it may be shown (no password; a plain path as it was given)."""
    shown = "://" in url or url.startswith("memory:") or is_conninfo(url)
    return redact(url) if shown else os.fspath(url)
