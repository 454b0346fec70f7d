"""What the commands that work on stored runs share: the ``--store`` option, opening the store,
an engine on it, and times shown relative to now."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table

from flowtide.authoring.nodes import NodeRegistry
from flowtide.cli.common import BadInput, escape, out
from flowtide.engine import Engine
from flowtide.store.base import EventRecord, Store, StoreOpenError, UnknownRunError
from flowtide.store.urls import DEFAULT_STORE, is_conninfo, open_store, redact

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


async def opened(url: str) -> Store:
    """The store ``url`` names, opened; bad input (exit 2, one line, no password) if it cannot
    be."""
    try:
        return await open_store(url)
    except StoreOpenError as exc:
        raise BadInput(str(exc)) from None


@asynccontextmanager
async def client(
    url: str, *, registry: NodeRegistry | None = None, **options: Any
) -> AsyncIterator[Engine]:
    """An engine on the store that runs no nodes (a client: workers do), closed at the end."""
    store = await opened(url)
    engine = Engine(store=store, registry=registry, executes=False, **options)
    try:
        yield engine
    finally:
        await engine.close()
        await store.close()


def unknown_run(exc: UnknownRunError, url: str) -> BadInput:
    return BadInput(f"no run {exc.run_id!r} in {redact(url)}")


def event_json(event: EventRecord) -> dict[str, Any]:
    """One history event as the commands print it in JSON (its instant as ISO text)."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "at": event.at.isoformat(),
        "run_id": event.run_id,
        "placement": event.placement,
        "attempt": event.attempt,
        "token_id": event.token_id,
        "data": event.data,
    }


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
