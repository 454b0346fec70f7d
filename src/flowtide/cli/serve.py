"""``flowtide serve``: the HTTP API (and the dashboard's files) on a store, with uvicorn; with
``--nodes`` a worker in the same process runs the runs too."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowtide.cli.code import current_directory_first, load_modules
from flowtide.cli.common import BadInput, NodesOption, err, escape, guarded, out
from flowtide.cli.stores import DEFAULT, StoreOption, opened, shown_store
from flowtide.cli.worker import DRAIN_SECONDS, DrainOption

if TYPE_CHECKING:
    from flowtide.authoring.nodes import NodeRegistry
    from flowtide.engine.events import Hook

__all__ = ["serve"]

DEFAULT_PORT = 8321


@guarded
def serve(
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port to listen on.")
    ] = DEFAULT_PORT,
    store: StoreOption = DEFAULT,
    nodes: NodesOption = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="The API tokens, one 'name:token' a line (default: the one of "
            "FLOWTIDE_API_TOKEN, named 'default'; none: the server is read-only).",
        ),
    ] = None,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log a JSON line per request on stderr.")
    ] = False,
    drain_timeout: DrainOption = DRAIN_SECONDS,
) -> None:
    """Serve the HTTP API and the dashboard on the store (see docs/server.md). With --nodes, a
    worker in this process also runs the runs (drained on SIGTERM or Ctrl-C). Mutating
    requests need 'Authorization: Bearer TOKEN'; without a token the server is read-only."""
    try:
        from flowtide.server import create_app, load_tokens
        from flowtide.server.auth import TokenFileError
        from flowtide.server.running import run_server
    except ImportError as exc:
        raise BadInput(
            f"flowtide serve needs the server extra ({exc.name} is missing): "
            "pip install 'flowtide[server]'"
        ) from None
    try:
        tokens = load_tokens(token_file)
    except TokenFileError as exc:
        raise BadInput(str(exc)) from None
    registry: NodeRegistry | None = None
    if nodes:
        with current_directory_first():
            registry = load_modules(nodes).registry()
    asyncio.run(_check_store(store))
    logging.basicConfig(level="INFO", format="%(message)s")
    logging.getLogger("flowtide.server").setLevel("INFO" if log_json else "WARNING")
    app = create_app(
        store,
        hooks=_tracing() if registry is not None else (),
        tokens=tokens,
        worker=registry is not None,
        registry=registry,
        log_json=log_json,
        drain=timedelta(seconds=drain_timeout),
    )
    where = f"http://{host}:{port}"
    out.print(f"serving {escape(shown_store(store))} at {escape(where)}")
    if tokens.read_only:
        err.print(
            "[yellow]read-only[/]: no API token (set FLOWTIDE_API_TOKEN or --token-file); "
            "every POST is refused"
        )
    else:
        names = ", ".join(sorted(tokens.by_name))
        out.print(f"  tokens: {escape(names)}")
    if registry is not None:
        out.print("  with a worker in this process")
    run_server(app, host, port)


def _tracing() -> list[Hook]:
    """The worker's spans, when OpenTelemetry is installed (extra ``flowtide[otel]``)."""
    try:
        from flowtide.tracing import SpanHook
    except ImportError:
        return []
    return [SpanHook()]


async def _check_store(url: str) -> None:
    """Bad input (exit 2, one line, no password) if the store cannot be opened."""
    store = await opened(url)
    await store.close()
