"""``flowtide schema``: print the JSON Schemas of node settings and of flow documents."""

from __future__ import annotations

import json
from typing import Any

import typer

from flowtide.cli.common import EXIT_CODES_HELP, guarded
from flowtide.model.schemas import flow_schema, node_settings_schema

schema_app = typer.Typer(
    name="schema",
    help="Print a JSON Schema (draft 2020-12).",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


def _print(schema: dict[str, Any]) -> None:
    typer.echo(json.dumps(schema, indent=2, ensure_ascii=False))


@schema_app.command("node-settings", epilog=EXIT_CODES_HELP)
@guarded
def node_settings() -> None:
    """The node-settings schema: timeout, timeout_anchor, release_on, timers, retry."""
    _print(node_settings_schema())


@schema_app.command("flow", epilog=EXIT_CODES_HELP)
@guarded
def flow() -> None:
    """The schema of a whole flow in its native (JSON or YAML) shape."""
    _print(flow_schema())
