"""The ``flowtide`` command: one Typer app, one module per command group."""

from __future__ import annotations

from typing import Annotated

import typer

from flowtide import __version__
from flowtide.cli.common import EXIT_CODES_HELP
from flowtide.cli.demo import demo
from flowtide.cli.flows import flows_app
from flowtide.cli.operate import cancel, signal, start
from flowtide.cli.prune import prune
from flowtide.cli.render import render
from flowtide.cli.run import run
from flowtide.cli.runs import explain, history, runs, show
from flowtide.cli.schema import schema_app
from flowtide.cli.serve import serve
from flowtide.cli.simulate import simulate
from flowtide.cli.validate import validate
from flowtide.cli.worker import worker
from flowtide.cli.workers import workers

app = typer.Typer(
    name="flowtide",
    help="Flowtide: durable workflows with per-node timeouts, parking and timeout anchors.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"flowtide {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the version and exit.",
            callback=_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Flowtide: durable workflows with per-node timeouts, parking and timeout anchors."""


app.command("validate", epilog=EXIT_CODES_HELP)(validate)
app.command("render", epilog=EXIT_CODES_HELP)(render)
app.command("run", epilog=EXIT_CODES_HELP)(run)
app.command("start", epilog=EXIT_CODES_HELP)(start)
app.command("worker", epilog=EXIT_CODES_HELP)(worker)
app.command("workers", epilog=EXIT_CODES_HELP)(workers)
app.command("signal", epilog=EXIT_CODES_HELP)(signal)
app.command("cancel", epilog=EXIT_CODES_HELP)(cancel)
app.command("runs", epilog=EXIT_CODES_HELP)(runs)
app.command("show", epilog=EXIT_CODES_HELP)(show)
app.command("status", epilog=EXIT_CODES_HELP, help="The same as show.", hidden=True)(show)
app.command("history", epilog=EXIT_CODES_HELP)(history)
app.command("explain", epilog=EXIT_CODES_HELP)(explain)
app.command("prune", epilog=EXIT_CODES_HELP)(prune)
app.command("serve", epilog=EXIT_CODES_HELP)(serve)
app.command("simulate", epilog=EXIT_CODES_HELP)(simulate)
app.command("demo", epilog=EXIT_CODES_HELP)(demo)
app.add_typer(flows_app)
app.add_typer(schema_app)
