"""``flowtide worker``: run nodes and the sweeper on the store's runs until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

import typer
from rich.markup import escape

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import NodesOption, guarded, out
from flowtide.cli.stores import (
    DEFAULT,
    JsonOption,
    StoreOption,
    event_json,
    opened,
    shown_store,
)
from flowtide.engine import Engine
from flowtide.engine.leases import LEASE_TTL
from flowtide.engine.threadslots import DEFAULT_THREADS
from flowtide.store.base import EventRecord

LOG_VARIABLE = "FLOWTIDE_LOG"
"""The level of the worker's log on stderr (default WARNING: leases lost, a store that fails)."""

log = logging.getLogger("flowtide.worker")


@guarded
def worker(
    nodes: NodesOption = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            help="At most this many runs driven at once (default: no limit).",
        ),
    ] = None,
    poll: Annotated[
        float,
        typer.Option(
            "--poll",
            min=0.05,
            help="Look for work at least this often (seconds), should a notice be lost.",
        ),
    ] = 1.0,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            min=0.1,
            help="How long (seconds) the runs this worker holds stay its own should it stop "
            "renewing them (it died): then other workers take them over.",
        ),
    ] = LEASE_TTL.total_seconds(),
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Do not print the runs' events.")
    ] = False,
    threads: Annotated[
        int,
        typer.Option(
            "--threads",
            min=1,
            help="Worker threads for sync nodes: at most this many of their attempts run at "
            "once; the others start (and their windows begin) when a thread is free.",
        ),
    ] = DEFAULT_THREADS,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Run the store's runs: their nodes, their timeouts, timers and deadlines, until stopped.

    Any number of workers may share a store, on any number of machines: each run is driven by
    one worker at a time, under a lease it renews; a worker that dies loses its runs to the
    others when their leases expire. SIGTERM or SIGINT (Ctrl-C) stops it: the runs it holds are
    given back at once, for another worker to take (nodes in flight run again there), and it
    exits 0. Events are printed as they happen (one JSON object per line with --json).
    """
    with current_directory_first():
        code = load_modules(nodes or [])
        settings = _Settings(
            concurrency, poll, timedelta(seconds=lease), quiet, json_output, threads
        )
        asyncio.run(_work(store, code, settings))


@dataclass(frozen=True)
class _Settings:
    concurrency: int | None
    poll: float
    lease: timedelta
    quiet: bool
    as_json: bool
    threads: int = DEFAULT_THREADS


async def _work(url: str, code: Code, settings: _Settings) -> None:
    logging.basicConfig(
        level=os.environ.get(LOG_VARIABLE, "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    store = await opened(url)
    as_json = settings.as_json
    hooks = [] if settings.quiet else [_json_line if as_json else _text_line]
    engine = Engine(
        store=store,
        registry=code.registry(),
        hooks=hooks,
        max_runs=settings.concurrency,
        poll=settings.poll,
        lease_ttl=settings.lease,
        max_threads=settings.threads,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        if not as_json:
            out.print(
                f"worker [bold]{escape(engine.owner)}[/] on {escape(shown_store(url))}: "
                "taking runs (Ctrl-C to stop)"
            )
        engine.sweeper.wake()
        await stop.wait()
        held = len(engine.held_runs())
        log.info("stopping: giving back %d run(s)", held)
        if not as_json:
            out.print(f"stopping: giving back {held} run(s) it holds")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        with contextlib.suppress(Exception):
            await engine.close()
        log.info("engine closed")
        await store.close()
        log.info("store closed")


def _text_line(event: EventRecord) -> None:
    where = f" {event.placement}" if event.placement else ""
    out.print(
        f"{event.at.strftime('%H:%M:%S')} {escape(event.run_id[:12])} {event.kind}{escape(where)}"
    )


def _json_line(event: EventRecord) -> None:
    print(json.dumps(event_json(event), default=str), flush=True)


__all__ = ["worker"]
