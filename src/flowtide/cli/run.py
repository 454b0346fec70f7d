"""``flowtide run``: run one flow document to its end and print the result."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import textwrap
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import markup
from rich.console import Console
from rich.live import Live

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import (
    DEBUG_VARIABLE,
    ExitCode,
    NodesOption,
    WithOption,
    err,
    escape,
    guarded,
    out,
)
from flowtide.cli.inputs import LIFECYCLE_STYLE, flows_to_run, parse_deadline, parse_state
from flowtide.cli.left import Left, left_in, signal_address, tell
from flowtide.cli.operate import start
from flowtide.cli.stores import (
    DEFAULT,
    StoreOption,
    event_table,
    opened,
    print_table,
    relative,
    store_option,
)
from flowtide.client.views import event_json
from flowtide.engine import Engine, Lifecycle, RunResult
from flowtide.engine.run.children import open_parks
from flowtide.model.flow import Flow
from flowtide.store.memory import MemoryStore


async def _run_flows(
    url: str,
    flows: list[Flow],
    code: Code,
    state: dict[str, Any],
    deadline: timedelta | datetime | None,
    shown: Console,
) -> tuple[RunResult | Left, list[dict[str, Any]]]:
    """Run the first flow to its end in this process, waiting (with a line on ``shown`` saying
    for what) while it is parked. Ctrl-C (or SIGTERM) stops waiting: the run is given back to
    the store as it is, and where it was left is the result."""
    store = await opened(url)
    engine = Engine(store=store, flows=flows, registry=code.registry())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    run_id = uuid.uuid4().hex  # (known here, should the run be stopped before it returns)
    result: RunResult | None = None
    try:
        first = await _until(stop, engine.run(flows[0], state, deadline=deadline, run_id=run_id))
        result = first
        if first is not None and first.lifecycle is Lifecycle.PARKED:
            result = await _wait_parked(engine, url, first, stop, shown)
        if result is None:
            await engine.close()  # (first: the run is given back before it is looked at)
            return await left_in(store, run_id), []
        history = [event_json(e) for e in await engine.history(result.run_id)]
        return result, history
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await engine.close()
        await store.close()


async def _until(stop: asyncio.Event, work: Awaitable[RunResult]) -> RunResult | None:
    """``work``'s result, or None if ``stop`` is set first (``work`` is then cancelled)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    return task.result() if task.done() and not task.cancelled() else None


async def _wait_parked(
    engine: Engine, url: str, parked: RunResult, stop: asyncio.Event, console: Console
) -> RunResult | None:
    """Wait for a parked run's end, showing what it waits for on ``console`` (refreshed every
    second)."""
    run_id = parked.run_id
    ending = asyncio.ensure_future(engine.wait(run_id))
    shown = ""
    with Live(console=console, transient=True, auto_refresh=False) as live:
        while not ending.done() and not stop.is_set():
            line = await waiting_line(engine, url, run_id)
            if console.is_terminal:
                live.update(line, refresh=True)
            elif line != shown:
                console.print(line)
            shown = line
            await asyncio.wait({ending}, timeout=1.0)
    if ending.done():
        return ending.result()
    ending.cancel()
    return None


async def waiting_line(engine: Engine, url: str, run_id: str) -> str:
    """What a parked run waits for: ``waiting: parked at X (key K), window ends in 9m 58s``."""
    now = datetime.now(UTC)
    parks = await open_parks(engine.store, run_id)  # (a subflow's child's parks too)
    if not parks:
        return "waiting: the run is moving"
    where = "; ".join(
        f"parked at {escape(p.placement)}"
        + (f" (key {escape(p.key)})" if p.key else "")
        + (f", window ends {relative(p.deadline, now)}" if p.deadline else "")
        for p in parks
    )
    first = parks[0]
    how = signal_address(first)
    if isinstance(engine.store, MemoryStore):
        how_else = "no other process can signal it (memory: is this process's own)"
        ctrl_c = "Ctrl-C ends it, and it is lost"
    else:
        how_else = f"signal it: flowtide signal {escape(how + store_option(url))}"
        ctrl_c = "Ctrl-C leaves the run in the store"
    return f"[yellow]waiting[/]: {where} [dim]· {how_else} · {ctrl_c}[/]"


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
        child = f" in child run {escape(p.run_id)}" if p.run_id else ""
        out.print(f"  parked at {escape(p.placement)}{child}{key}{until}")
    debug = os.environ.get(DEBUG_VARIABLE) == "1"
    for e in result.errors:
        where = f" at {escape(e.placement)}" if e.placement else ""
        out.print(f"  [red]{escape(e.type)}[/]{where}: {escape(e.message)}")
        if e.traceback is not None and debug:
            out.print(markup.escape(textwrap.indent(e.traceback.rstrip(), "    ")))
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
    detach: Annotated[
        bool,
        typer.Option("--detach", "-d", help="Start the run and return at once (a worker runs it)."),
    ] = False,
    store: StoreOption = DEFAULT,
) -> None:
    """Run a flow document to its end in this process and print the result.

    The run is kept in the store (--store). While it is parked on the outside world the command
    waits, saying for what and how to signal it; Ctrl-C stops waiting and leaves the run in the
    store, for a worker (flowtide worker) to go on with. With --detach it returns at once, as
    flowtide start does. Each node, reducer and source function is found among those the
    modules given with --nodes register (nothing is imported because a flow names it). Exits 0
    when the run completed, 1 when it failed, was cancelled or timed out, 130 when it was left
    waiting, 2 on bad input.
    """
    if detach:
        start(str(file), input, deadline, None, nodes, others, store, json_output)
        return
    state = parse_state(input)
    when = parse_deadline(deadline)
    shown = err if json_output else out  # (with --json, stdout has the JSON only)
    with current_directory_first():
        code = load_modules(nodes or [])
        flows = flows_to_run(file, others or [], code)
        result, events = asyncio.run(_run_flows(store, flows, code, state, when, shown))
    if isinstance(result, Left):
        tell(result, nodes or [], store, json_output)
        raise typer.Exit(ExitCode.INTERRUPTED)
    if json_output:
        data = result.to_dict()
        if history:
            data["history"] = events
        out.print_json(json.dumps(data, default=str))
    else:
        print_result(result)
        if history:
            print_table(event_table(events))
    if result.lifecycle is not Lifecycle.COMPLETED:
        raise typer.Exit(ExitCode.FAILURE)
