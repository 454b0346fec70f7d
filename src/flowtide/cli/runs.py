"""``flowtide runs``, ``show``, ``history`` and ``explain``: read stored runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich import markup
from rich.table import Column, Table

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import BadInput, NodesOption, escape, guarded, out
from flowtide.cli.inputs import LIFECYCLE_STYLE
from flowtide.cli.operate import RunArgument
from flowtide.cli.stores import (
    DEFAULT,
    JsonOption,
    StoreOption,
    client,
    emit_json,
    event_table,
    opened,
    print_table,
    relative,
    resolve_run,
    unknown_run,
)
from flowtide.client.views import Row, event_json, next_deadline, run_detail, run_json, run_row
from flowtide.engine import EngineError, Lifecycle
from flowtide.store.base import TokenRecord, UnknownRunError


def _style(lifecycle: str) -> str:
    try:
        return LIFECYCLE_STYLE.get(Lifecycle(lifecycle), "white")
    except ValueError:
        return "white"


def _where(tokens: list[TokenRecord]) -> str:
    """Where a run's live tokens are: ``collect-payment (parked), notify (running)``."""
    return ", ".join(f"{t.placement} ({t.status.value})" for t in tokens) or "-"


def _waiting(nodes: list[str]) -> str:
    """What a run no live worker can drive waits for."""
    return f"waiting for a worker with node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"


# -- runs ------------


@guarded
def runs(
    lifecycle: Annotated[
        str | None,
        typer.Option(
            "--lifecycle",
            "-l",
            help="Only runs in this lifecycle: pending, running, parked, completed, failed, "
            "cancelled, timed_out.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many runs, the newest first.")
    ] = 50,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """List stored runs, newest first: where each run's tokens are, its next deadline and the
    time left, and which worker holds it."""
    if lifecycle is not None and lifecycle not in {m.value for m in Lifecycle}:
        choices = ", ".join(m.value for m in Lifecycle)
        raise BadInput(f"--lifecycle {lifecycle!r} is not a lifecycle ({choices})")
    rows = asyncio.run(_runs(store, lifecycle, limit))
    now = datetime.now(UTC)
    if json_output:
        emit_json([run_json(*row) for row in rows])
        return
    if not rows:
        out.print("no runs" + (f" {lifecycle}" if lifecycle else ""))
        return
    table = Table(
        Column("run", overflow="fold"),
        Column("flow", overflow="fold"),
        "lifecycle",
        Column("where", overflow="fold"),
        "next deadline",
        Column("held by", overflow="fold"),
    )
    for run, tokens, lease, waiting in rows:
        deadline = next_deadline(run, tokens)
        when = f"{deadline.isoformat()} ({relative(deadline, now)})" if deadline else "-"
        table.add_row(
            escape(run.id),
            escape(run.flow_id),
            f"[{_style(run.lifecycle)}]{run.lifecycle}[/]",
            escape(_waiting(waiting) if waiting else _where(tokens)),
            when,
            escape(lease.owner) if lease is not None else "-",
        )
    print_table(table)


async def _runs(url: str, lifecycle: str | None, limit: int) -> list[Row]:
    store = await opened(url, create=False)
    try:
        found = sorted(
            await store.list_runs(lifecycle), key=lambda r: (r.created_at, r.id), reverse=True
        )
        beats = list(await store.workers())
        return [await run_row(store, run, beats) for run in found[: max(limit, 0)]]
    finally:
        await store.close()


# -- show ------------


@guarded
def show(run: RunArgument, store: StoreOption = DEFAULT, json_output: JsonOption = False) -> None:
    """Show one run: lifecycle and outcome, its tokens and open parks with their deadlines and
    time left, who holds it, and its state."""
    data = asyncio.run(_show(store, run))
    if json_output:
        emit_json(data)
        return
    now = datetime.now(UTC)
    style = _style(data["lifecycle"])
    outcome = f", outcome [bold]{escape(str(data['outcome']))}[/]" if data["outcome"] else ""
    out.print(f"run [bold]{escape(data['run_id'])}[/]: [{style}]{data['lifecycle']}[/]{outcome}")
    out.print(f"  flow {escape(data['flow'])} version {escape(data['version'])}")
    out.print(f"  created {data['created_at'].isoformat()}")
    if data["deadline"] is not None:
        out.print(
            f"  run deadline {data['deadline'].isoformat()} ({relative(data['deadline'], now)})"
        )
    held = data["held_by"]
    if held is not None:
        out.print(f"  held by {escape(held)} (lease {relative(data['lease_expires'], now)})")
    if data["waiting_for"]:
        out.print(f"  [yellow]{escape(_waiting(data['waiting_for']))}[/]")
    for t in data["tokens"]:
        ends = t["deadline"]
        window = f", window ends {ends.isoformat()} ({relative(ends, now)})" if ends else ""
        out.print(
            f"  token {escape(t['token_id'])} at [bold]{escape(t['placement'])}[/]: "
            f"{t['status']}, attempt {t['attempt']}{window}"
        )
    for p in data["parks"]:
        key = f" key {escape(str(p['key']))}" if p["key"] else ""
        ends = p["deadline"]
        until = f", until {ends.isoformat()} ({relative(ends, now)})" if ends else ""
        child = f" in child run {escape(p['run_id'])}" if "run_id" in p else ""
        out.print(f"  parked at [bold]{escape(p['placement'])}[/]{child}{key}{until}")
    for r in data["pending_requests"]:
        out.print(
            f"  pending {r['kind']} request {escape(r['id'])}, recorded "
            f"{r['requested_at'].isoformat()} ({relative(r['requested_at'], now)}): a worker "
            "applies it when it takes the run"
        )
    for e in data["errors"]:
        out.print(f"  [red]{escape(str(e.get('type')))}[/]: {escape(str(e.get('message')))}")
    out.print("  state: " + escape(json.dumps(data["state"], sort_keys=True, default=str)))


async def _show(url: str, given: str) -> dict[str, Any]:
    store = await opened(url, create=False)
    try:
        run_id = await resolve_run(store, given, url)
        return await run_detail(store, run_id)
    finally:
        await store.close()


# -- history ------------


@guarded
def history(
    run: RunArgument, store: StoreOption = DEFAULT, json_output: JsonOption = False
) -> None:
    """Print a run's events, in order."""
    events = asyncio.run(_history(store, run))
    if json_output:
        emit_json(events)
        return
    print_table(event_table(events))


async def _history(url: str, given: str) -> list[dict[str, Any]]:
    store = await opened(url, create=False)
    try:
        events = await store.history(await resolve_run(store, given, url))
        return [event_json(e) for e in events]
    finally:
        await store.close()


# -- explain ------------


@guarded
def explain(
    run: RunArgument,
    placement: Annotated[
        str | None,
        typer.Option("--placement", "-p", help="Explain this placement's window only."),
    ] = None,
    nodes: NodesOption = None,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Explain a run's deadlines: for each placement with a window (or --placement only), when
    it ends, from which anchor, and which setting gave its timeout; also once the run has
    ended (why it expired, from which anchor)."""
    with current_directory_first():
        code = load_modules(nodes or [])
        run_id, found = asyncio.run(_explain(store, code, run, placement))
    if json_output:
        emit_json([dataclasses.asdict(e) for e in found])
        return
    if not found:
        out.print(f"run {escape(run_id)}: no placement with a window or timers was visited")
    for e in found:
        out.print(markup.escape(str(e)))  # (several lines of its own)


async def _explain(
    url: str, code: Code, given: str, placement: str | None
) -> tuple[str, list[Any]]:
    async with client(url, registry=code.registry(), create=False) as engine:
        run = await resolve_run(engine.store, given, url)
        try:
            if placement is not None:
                return run, [await engine.explain(run, placement=placement)]
            return run, list(await engine.explain_run(run))
        except UnknownRunError as exc:
            raise unknown_run(exc, url) from None
        except EngineError as exc:
            raise BadInput(str(exc)) from None
