"""``flowtide run``: run one flow document to its end and print the result."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from flowtide.cli.common import DEBUG_VARIABLE, ExitCode, fail, guarded, out
from flowtide.engine import Engine, Lifecycle, RunResult

LIFECYCLE_STYLE = {
    Lifecycle.COMPLETED: "green",
    Lifecycle.FAILED: "red",
    Lifecycle.CANCELLED: "yellow",
    Lifecycle.TIMED_OUT: "yellow",
}


def _parse_input(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"--input is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise fail("--input must be a JSON object (the run's initial state)")
    return value


async def _run_file(
    file: Path, state: dict[str, Any], deadline: str | None, modules: list[str]
) -> tuple[RunResult, list[dict[str, Any]]]:
    from flowtide.authoring.nodes import NodeRegistry, as_node
    from flowtide.documents import load_flow

    registry = NodeRegistry()
    for module in modules:
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            raise fail(f"cannot import node module {module!r}: {exc}") from None
        for impl in getattr(loaded, "NODES", ()):
            registry.register(as_node(impl))
    flow = load_flow(file, registry=registry)
    async with Engine(flows=[flow], registry=registry) as engine:
        result = await engine.run(flow, state, deadline=deadline)
        history = [
            {
                "seq": e.seq,
                "kind": e.kind,
                "at": e.at.isoformat(),
                "placement": e.placement,
                "attempt": e.attempt,
                "data": e.data,
            }
            for e in await engine.history(result.run_id)
        ]
    return result, history


def print_result(result: RunResult) -> None:
    """A human summary of a run result."""
    style = LIFECYCLE_STYLE.get(result.lifecycle, "white")
    out.print(
        f"run [bold]{escape(result.run_id)}[/]: [{style}]{result.lifecycle.value}[/]"
        + (f", outcome [bold]{escape(result.outcome)}[/]" if result.outcome else "")
    )
    if result.interrupted_at is not None:
        i = result.interrupted_at
        out.print(f"  interrupted: {i.reason} at {escape(str(i.node))} ({i.at.isoformat()})")
    debug = os.environ.get(DEBUG_VARIABLE) == "1"
    for e in result.errors:
        where = f" at {escape(e.placement)}" if e.placement else ""
        out.print(f"  [red]{escape(e.type)}[/]{where}: {escape(e.message)}")
        if e.traceback is not None and debug:
            out.print(escape(textwrap.indent(e.traceback.rstrip(), "    ")))
    traced = sum(e.traceback is not None for e in result.errors)
    if traced and not debug:
        which = "its traceback" if traced == 1 else "their tracebacks"
        out.print(f"  [dim](set {DEBUG_VARIABLE}=1 to see {which})[/]")
    for w in result.warnings:
        out.print(f"  [yellow]warning[/]: {escape(w)}")
    out.print("  state: " + escape(json.dumps(result.state, default=str, sort_keys=True)))


@guarded
def run(
    file: Annotated[
        Path,
        typer.Argument(
            help="The flow document (JSON-LD, JSON or YAML).", exists=True, dir_okay=False
        ),
    ],
    input: Annotated[
        str, typer.Option("--input", "-i", help="The initial state, a JSON object.")
    ] = "{}",
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    deadline: Annotated[
        str | None,
        typer.Option("--deadline", help="A deadline for the whole run (ISO 8601, such as PT5M)."),
    ] = None,
    nodes: Annotated[
        list[str] | None,
        typer.Option(
            "--nodes",
            "-n",
            help="A module to import first: its @node implementations register themselves, and "
            "those listed in its NODES are used too.",
        ),
    ] = None,
    history: Annotated[
        bool, typer.Option("--history", help="Also print the run's events.")
    ] = False,
) -> None:
    """Run a flow document to its end and print the result.

    Nodes are resolved in the node registry (modules given with --nodes register theirs) or
    imported from 'module:attribute' references. Exits 0 when the run completed, 1 when it
    failed, was cancelled or timed out, 2 on bad input.
    """
    state = _parse_input(input)
    result, events = asyncio.run(_run_file(file, state, deadline, list(nodes or [])))
    if json_output:
        data = result.to_dict()
        if history:
            data["history"] = events
        out.print_json(json.dumps(data, default=str))
    else:
        print_result(result)
        if history:
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
            out.print(table)
    if result.lifecycle is not Lifecycle.COMPLETED:
        raise typer.Exit(ExitCode.FAILURE)
