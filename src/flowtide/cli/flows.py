"""``flowtide flows``: the flows kept in the store, by id; ``flowtide flows register``: put flow
documents there, so that runs may be started by flow id and workers learn them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Column, Table

from flowtide.cli.common import (
    EXIT_CODES_HELP,
    BadInput,
    display_path,
    guarded,
    out,
    print_problems,
)
from flowtide.cli.loading import load_files
from flowtide.cli.stores import DEFAULT, JsonOption, StoreOption, emit_json, opened, print_table
from flowtide.client.registration import register_flows, stored_catalog
from flowtide.client.results import RegisteredFlow
from flowtide.client.views import registered_json, version_json
from flowtide.clock import SystemClock
from flowtide.store.base import StoredFlowVersion

__all__ = ["flows_app"]

DIGEST_SHOWN = 12
"""How many hex digits of a digest the table shows (the JSON has them all)."""

flows_app = typer.Typer(
    name="flows",
    help="List the flows kept in the store (with no command), or register flow documents.",
    epilog=EXIT_CODES_HELP,
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


@flows_app.callback()
@guarded
def flows(
    context: typer.Context, store: StoreOption = DEFAULT, json_output: JsonOption = False
) -> None:
    """List the flows kept in the store: each version of each flow id, its digest, when it was
    first stored and how many runs were started on it. The latest version of an id (stored
    last) is the one `flowtide start FLOW_ID` starts."""
    if context.invoked_subcommand is not None:
        return
    versions = asyncio.run(_versions(store))
    if json_output:
        emit_json([version_json(v) for v in versions])
        return
    if not versions:
        out.print("no flows stored; store some with: flowtide flows register FILE...")
        return
    table = Table(
        Column("flow", overflow="fold"), "version", "digest", "stored (UTC)", "runs", "latest"
    )
    for v in versions:
        when = f"{v.stored_at:%Y-%m-%d %H:%M:%S}" if v.stored_at is not None else "-"
        table.add_row(
            escape(v.flow_id),
            escape(v.version),
            v.digest[:DIGEST_SHOWN],
            when,
            str(v.runs),
            "latest" if v.latest else "",
        )
    print_table(table)


async def _versions(url: str) -> list[StoredFlowVersion]:
    store = await opened(url, create=False)
    try:
        return list(await store.flow_versions())
    finally:
        await store.close()


@flows_app.command("register", epilog=EXIT_CODES_HELP)
@guarded
def register(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Flow documents (JSON-LD, JSON or YAML). They are read together, with the "
            "flows stored already, so a subflow may name a flow of another file or of the store.",
            show_default=False,
        ),
    ],
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Check flow documents as `flowtide validate` does (no node code is imported) and keep
    them in the store; runs started by a flow's id then use the document registered last.

    Every document is stored, or none: when any has an error, every problem is printed with its
    location and the command exits 2. A document stored already is left as it is.
    """
    done = asyncio.run(_register(store, files))
    if json_output:
        emit_json([registered_json(r) for r in done])
        return
    for r in done:
        what = "registered" if r.new else "already stored"
        out.print(
            f"{what}: [bold]{escape(r.flow_id)}[/] version {escape(r.version)} "
            f"({r.digest[:DIGEST_SHOWN]})"
        )


async def _register(url: str, files: list[Path]) -> list[RegisteredFlow]:
    store = await opened(url)
    try:
        loaded = load_files(files, None, await stored_catalog(store))
        for item in loaded:
            print_problems(item.problems)
        bad = [display_path(item.path) for item in loaded if item.flow is None]
        if bad:
            what = "is not a valid flow" if len(bad) == 1 else "are not valid flows"
            raise BadInput(f"{', '.join(bad)} {what}; nothing registered")
        good = [item.flow for item in loaded if item.flow is not None]
        return await register_flows(store, good, SystemClock().now())
    finally:
        await store.close()
