"""``flowtide workers``: the workers on a store, from their heartbeats."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table

from flowtide.cli.common import guarded, out
from flowtide.cli.stores import (
    DEFAULT,
    JsonOption,
    StoreOption,
    emit_json,
    opened,
    print_table,
    relative,
)
from flowtide.engine.worker.heartbeat import STALE_AFTER, is_live
from flowtide.store.base import WorkerRecord


@guarded
def workers(
    every: Annotated[
        bool,
        typer.Option("--all", "-a", help="Also the workers not seen lately (stopped or dead)."),
    ] = False,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """List the live workers on the store, from their heartbeats: id, host, process id, since
    when, when last seen, how many runs each holds, and the nodes each implements. A worker
    not seen for a few of its lease terms has stopped or died (--all lists those too)."""
    now = datetime.now(UTC)
    found = [(w, is_live(w, now)) for w in asyncio.run(_workers(store)) if every or is_live(w, now)]
    if json_output:
        emit_json([_worker_json(w, live) for w, live in found])
        return
    if not found:
        gone = "" if every else f" (none seen within {STALE_AFTER} lease terms; --all for more)"
        out.print("no workers" + gone)
        return
    table = Table(
        Column("worker", overflow="fold"),
        Column("host", overflow="fold"),
        "pid",
        "since",
        "last seen",
        "runs held",
        Column("nodes", overflow="fold"),
    )
    for w, live in found:
        seen = relative(w.last_seen, now) + ("" if live else " [red](gone)[/]")
        table.add_row(
            escape(w.worker_id),
            escape(w.host),
            str(w.pid),
            w.started_at.isoformat(timespec="seconds"),
            seen,
            str(w.runs_held),
            escape(", ".join(w.nodes) or "-"),
        )
    print_table(table)


async def _workers(url: str) -> list[WorkerRecord]:
    store = await opened(url, create=False)
    try:
        return list(await store.workers())
    finally:
        await store.close()


def _worker_json(w: WorkerRecord, live: bool) -> dict[str, Any]:
    return {
        "worker_id": w.worker_id,
        "host": w.host,
        "pid": w.pid,
        "started_at": w.started_at,
        "last_seen": w.last_seen,
        "live": live,
        "lease_ttl": w.lease_ttl,
        "runs_held": w.runs_held,
        "nodes": w.nodes,
        "waiting": w.waiting,
    }


__all__ = ["workers"]
