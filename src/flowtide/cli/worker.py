"""``flowtide worker``: run nodes and the sweeper on the store's runs until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

import typer

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import BadInput, NodesOption, escape, guarded, out
from flowtide.cli.store_ready import open_when_ready
from flowtide.cli.stores import DEFAULT, JsonOption, StoreOption, shown_store
from flowtide.client.views import event_json
from flowtide.clock import SystemClock
from flowtide.engine import Engine
from flowtide.engine.events import Hook
from flowtide.engine.worker.instruments import EngineInstruments
from flowtide.engine.worker.leases import LEASE_TTL
from flowtide.engine.worker.threadslots import DEFAULT_THREADS
from flowtide.store.base import EventRecord, Store, StoreOpenError, StoreUnusableError
from flowtide.store.urls import store_for

LOG_VARIABLE = "FLOWTIDE_LOG"
"""The level of the worker's log on stderr (default INFO: a line per run; WARNING with
``--quiet``)."""

DRAIN_TIMEOUT = timedelta(seconds=30)
"""How long a stopping worker lets the nodes in flight finish, by default."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

log = logging.getLogger("flowtide.worker")

DRAIN_SECONDS = DRAIN_TIMEOUT.total_seconds()

DrainOption = Annotated[
    float,
    typer.Option(
        "--drain-timeout",
        min=0.0,
        help="On SIGTERM or Ctrl-C, how long (seconds) the nodes in flight may finish before the "
        "runs still at work are given back.",
    ),
]
ThreadsOption = Annotated[
    int,
    typer.Option(
        "--threads",
        min=1,
        help="Worker threads for sync nodes: at most this many of their attempts run at once; "
        "the others start (and their windows begin) when a thread is free.",
    ),
]

MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve this worker's Prometheus metrics on http://HOST:PORT/metrics (0: a free "
        "port, said on start; needs prometheus-client: pip install 'flowtide[server]').",
    ),
]
MetricsHostOption = Annotated[
    str, typer.Option("--metrics-host", help="The address --metrics-port listens on.")
]


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
    drain_timeout: DrainOption = DRAIN_SECONDS,
    events: Annotated[
        bool, typer.Option("--events", help="Also print every event of the runs it drives.")
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Log warnings only (not a line per run)."),
    ] = False,
    threads: ThreadsOption = DEFAULT_THREADS,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Run the store's runs: their nodes, their timeouts, timers and deadlines, until stopped.

    Any number of workers may share a store, on any number of machines: each run is driven by
    one worker at a time, under a lease it renews; a worker that dies loses its runs to the
    others when their leases expire. It logs a line on stderr per run it takes, parks, ends or
    gives back, and a warning per run it cannot drive (naming the node it lacks). SIGTERM or
    Ctrl-C drains it: it takes no new run, lets the nodes in flight finish for up to
    --drain-timeout seconds, gives back what it still holds and exits 0; a second signal stops
    it at once. A database that cannot be reached yet (its server down, still starting, or out
    of connections) is waited for: it says so once and tries again, less often as time goes
    by (every 30 seconds at most), until it opens or the worker is stopped; a wrong address,
    refused credentials or an unknown database stop it at once, exit 2. A store it cannot use
    as it is (damaged, read-only, its file deleted or replaced) stops it with one line, exit 2.
    --events prints every event (--json: one JSON object per line on stdout). --metrics-port
    serves its metrics to Prometheus (commit and attempt latency, sweeper lateness, lease
    takeovers, events by kind).
    """
    _logging(quiet)
    with current_directory_first():
        code = load_modules(nodes or [])
        settings = _Settings(
            concurrency,
            poll,
            timedelta(seconds=lease),
            timedelta(seconds=drain_timeout),
            events or json_output,
            quiet,
            json_output,
            threads,
            (metrics_host, metrics_port) if metrics_port is not None else None,
        )
        asyncio.run(_work(store, code, settings))


@dataclass(frozen=True)
class _Settings:
    concurrency: int | None
    poll: float
    lease: timedelta
    drain: timedelta
    events: bool
    quiet: bool
    as_json: bool
    threads: int = DEFAULT_THREADS
    metrics: tuple[str, int] | None = None
    """Where to serve the worker's Prometheus metrics (host, port), if anywhere."""


def _logging(quiet: bool) -> None:
    """Flowtide's log on stderr: a line per run (INFO), or warnings only; ``FLOWTIDE_LOG`` sets
    the level (of the libraries' logs too: by default they say warnings only)."""
    chosen = os.environ.get(LOG_VARIABLE, "").upper()
    if chosen and chosen not in logging.getLevelNamesMapping():
        raise BadInput(
            f"${LOG_VARIABLE}={chosen.lower()!r} is not a log level "
            "(DEBUG, INFO, WARNING, ERROR, CRITICAL)"
        )
    logging.basicConfig(
        level=chosen or "WARNING",
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("flowtide").setLevel(chosen or ("WARNING" if quiet else "INFO"))


async def _work(url: str, code: Code, settings: _Settings) -> None:
    async with _stop_signals() as signals:
        store = await _store_when_ready(url, signals)
        if store is None:
            return
        try:
            await _work_on(store, url, code, settings, signals)
        finally:
            await store.close()  # (also when the engine could not be made)
            log.debug("store closed")


@contextlib.asynccontextmanager
async def _stop_signals() -> AsyncIterator[asyncio.Queue[str]]:
    """The names of the stop signals (SIGTERM, SIGINT) received meanwhile, in order."""
    signals: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, signals.put_nowait, signum.name)
    try:
        yield signals
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


async def _store_when_ready(url: str, signals: asyncio.Queue[str]) -> Store | None:
    """The store ``url`` names, opened once its database is up (see :mod:`store_ready`); None
    when a stop signal comes first. Bad input when it can never open as named."""
    try:
        store = store_for(url)
    except StoreOpenError as exc:
        raise BadInput(str(exc)) from None
    loop = asyncio.get_running_loop()
    opening = loop.create_task(open_when_ready(store, shown_store(url), SystemClock()))
    stop = loop.create_task(signals.get())
    await asyncio.wait({opening, stop}, return_when=asyncio.FIRST_COMPLETED)
    if opening.done():
        if stop.done():
            signals.put_nowait(stop.result())  # (for the engine: it drains at once)
        stop.cancel()
        try:
            return opening.result()
        except StoreOpenError as exc:
            raise BadInput(str(exc)) from None
    opening.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await opening
    log.info("%s: stopped before the store opened", stop.result())
    return None


async def _work_on(
    store: Store, url: str, code: Code, settings: _Settings, signals: asyncio.Queue[str]
) -> None:
    as_json = settings.as_json
    hooks: list[Hook] = [_json_line if as_json else _text_line] if settings.events else []
    instruments = _metrics(settings.metrics, hooks, as_json) if settings.metrics else None
    engine = Engine(
        store=store,
        registry=code.registry(),
        hooks=hooks,
        max_runs=settings.concurrency,
        poll=settings.poll,
        lease_ttl=settings.lease,
        max_threads=settings.threads,
        instruments=instruments,
    )
    try:
        if not as_json:
            out.print(
                f"worker [bold]{escape(engine.owner)}[/] on {escape(shown_store(url))}: "
                "taking runs (Ctrl-C to stop)"
            )
        engine.sweeper.wake()
        broken = await _until_stopped(engine, settings.drain, signals)
        if broken is not None:
            raise BadInput(str(broken))
    finally:
        with contextlib.suppress(Exception):
            await engine.close()
        log.debug("engine closed")


def _metrics(where: tuple[str, int], hooks: list[Hook], as_json: bool) -> EngineInstruments:
    """The worker's Prometheus series, served at ``where`` from now on (their event hook added
    to ``hooks``)."""
    try:
        from prometheus_client import CollectorRegistry

        from flowtide.metrics import WorkerSeries, serve_metrics
    except ImportError as exc:
        raise BadInput(
            f"--metrics-port needs prometheus-client ({exc.name} is missing): "
            "pip install 'flowtide[server]'"
        ) from None
    registry = CollectorRegistry(auto_describe=True)
    series = WorkerSeries(registry)
    hooks.append(series.event)
    host, port = where
    try:
        port = serve_metrics(registry, port, host)
    except OSError as exc:
        raise BadInput(f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror}") from None
    shown = f"http://{host}:{port}/metrics"
    if as_json:
        log.info("metrics at %s", shown)
    else:
        out.print(f"metrics at {escape(shown)}")
    return series


async def _until_stopped(
    engine: Engine, drain: timedelta, signals: asyncio.Queue[str]
) -> StoreUnusableError | None:
    """Work until SIGTERM or SIGINT (in ``signals``), then drain (a second signal stops at
    once); or until the store becomes unusable (returned: a damaged, read-only, deleted or
    replaced database, which no retry mends)."""
    loop = asyncio.get_running_loop()
    first = loop.create_task(signals.get())
    breaking = loop.create_task(engine.sweeper.broken())
    await asyncio.wait({first, breaking}, return_when=asyncio.FIRST_COMPLETED)
    if not first.done():
        first.cancel()
        return breaking.result()
    breaking.cancel()
    log.info("%s: taking no new run", first.result())
    draining = loop.create_task(engine.drain(drain))
    second = loop.create_task(signals.get())
    done, _ = await asyncio.wait({draining, second}, return_when=asyncio.FIRST_COMPLETED)
    if draining in done:
        second.cancel()
        draining.result()
        return None
    log.warning("second signal (%s): stopping at once", second.result())
    draining.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await draining
    return None


def _text_line(event: EventRecord) -> None:
    where = f" {event.placement}" if event.placement else ""
    out.print(
        f"{event.at.strftime('%H:%M:%S')} {escape(event.run_id[:12])} {event.kind}{escape(where)}"
    )


def _json_line(event: EventRecord) -> None:
    print(json.dumps(event_json(event), default=str), flush=True)


__all__ = ["worker"]
