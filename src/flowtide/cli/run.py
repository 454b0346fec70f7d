"""``flowtide run``: run one flow document to its end and print the result."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import (
    DEBUG_VARIABLE,
    BadInput,
    ExitCode,
    NodesOption,
    WithOption,
    display_path,
    guarded,
    out,
    print_problems,
)
from flowtide.cli.loading import load_files
from flowtide.engine import Engine, Lifecycle, RunResult
from flowtide.errors import Problem
from flowtide.model.durations import parse_duration
from flowtide.model.flow import Flow

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
        raise BadInput(f"--input is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadInput("--input must be a JSON object (the run's initial state)")
    return value


def parse_deadline(text: str | None) -> timedelta | datetime | None:
    """``--deadline``: a duration (ISO 8601 or milliseconds) or an instant with a time zone."""
    if text is None:
        return None
    try:
        duration = parse_duration(text)
    except ValueError as exc:
        reason = str(exc)
    else:
        try:
            datetime.now(UTC) + duration
        except OverflowError:
            raise BadInput(f"--deadline {text!r}: the duration is too long") from None
        return duration
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--deadline: {reason}; or an instant with a time zone, such as '2026-01-01T09:00:00Z'"
        ) from None
    if instant.tzinfo is None:
        raise BadInput(
            f"--deadline {text!r}: an instant needs a time zone (such as 'Z' or '+01:00')"
        )
    return instant


def flows_to_run(
    file: Path,
    others: Sequence[Path],
    code: Code,
    excused: Callable[[Flow, Problem], bool] | None = None,
    hint: str = "name the module that implements a node with --nodes MODULE",
) -> list[Flow]:
    """The flow of ``file`` then those of ``others``, each checked against ``code``; the
    problems of every file, and exit 2, when one of them cannot run. ``excused`` says which
    errors of a loaded flow do not stop it from running (``simulate``: a scripted placement
    needs no code); ``hint`` says what to do about a node no module implements."""
    loaded = load_files([file, *others], code)
    if any(item.flow is None for item in loaded):
        for item in loaded:
            print_problems(item.problems)
        bad = [display_path(item.path) for item in loaded if item.flow is None]
        what = "is not a valid flow" if len(bad) == 1 else "are not valid flows"
        raise BadInput(f"{', '.join(bad)} {what}; nothing run")
    errors = [
        p
        for item in loaded
        for p in item.errors
        if excused is None or item.flow is None or not excused(item.flow, p)
    ]
    if errors:
        print_problems(errors)
        count = len(errors)
        what = "reference does not resolve" if count == 1 else "references do not resolve"
        shown = f"; {hint}" if code.unregistered else ""
        raise BadInput(f"cannot run {display_path(file)}: {count} {what}{shown}")
    return [item.flow for item in loaded if item.flow is not None]


async def _run_flows(
    flows: list[Flow], code: Code, state: dict[str, Any], deadline: timedelta | datetime | None
) -> tuple[RunResult, list[dict[str, Any]]]:
    async with Engine(flows=flows, registry=code.registry()) as engine:
        result = await engine.run(flows[0], state, deadline=deadline)
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
        at = f" at {escape(i.node)}" if i.node is not None else ""
        out.print(f"  interrupted: {i.reason}{at} ({i.at.isoformat()})")
    for p in result.parked:
        key = f", key {escape(p.key)}" if p.key else ""
        until = f", until {p.deadline.isoformat()}" if p.deadline else ""
        out.print(f"  parked at {escape(p.placement)}{key}{until}")
    if result.parked:
        out.print(
            "  [dim](flowtide run keeps nothing: the parked run ends with the command, "
            "no signal can reach it)[/]"
        )
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
            metavar="FILE", help="The flow document (JSON-LD, JSON or YAML).", show_default=False
        ),
    ],
    input: Annotated[
        str, typer.Option("--input", "-i", help="The initial state, a JSON object.")
    ] = "{}",
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    deadline: Annotated[
        str | None,
        typer.Option(
            "--deadline",
            help="A deadline for the whole run: a duration (ISO 8601, such as PT5M, or "
            "milliseconds) or an instant with a time zone (2026-01-01T09:00:00Z).",
        ),
    ] = None,
    nodes: NodesOption = None,
    others: WithOption = None,
    history: Annotated[
        bool, typer.Option("--history", help="Also print the run's events.")
    ] = False,
) -> None:
    """Run a flow document to its end and print the result.

    Each node is found among the nodes of the modules given with --nodes, or imported from its
    'module:attribute' reference. Exits 0 when the run completed, 1 when it failed, was
    cancelled, timed out or parked, 2 on bad input.
    """
    state = _parse_input(input)
    when = parse_deadline(deadline)
    with current_directory_first():
        code = load_modules(nodes or [])
        flows = flows_to_run(file, others or [], code)
        result, events = asyncio.run(_run_flows(flows, code, state, when))
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
