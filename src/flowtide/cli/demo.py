"""``flowtide demo``: the bundled example flows, checked and drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from flowtide.cli.common import ExitCode, fail, guarded, out, print_problems
from flowtide.cli.examples import bundled_examples, examples_dir
from flowtide.cli.loading import load_files
from flowtide.render.mermaid import render_mermaid


@guarded
def demo(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write each example's Mermaid chart into this folder as <name>.mmd.",
            file_okay=False,
        ),
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="Print each example's Mermaid chart.")
    ] = False,
) -> None:
    """Validate and render every bundled example flow.

    Running the examples arrives with the engine; for now the demo checks that each one loads,
    validates and renders, and shows what it found.
    """
    paths = bundled_examples()
    if not paths:
        raise fail("no bundled examples found in this installation", ExitCode.FAILURE)
    out.print(
        f"[bold]Flowtide demo[/]: {len(paths)} example flows from {escape(str(examples_dir()))}"
    )
    if output is not None:
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"cannot create {output}: {exc}", ExitCode.FAILURE) from None
    table = Table("example", "flow", "placements", "result")
    for column in table.columns:
        column.overflow = "fold"
    broken = 0
    for item in load_files(paths):
        print_problems(item.errors)
        if item.flow is None:
            broken += 1
            table.add_row(escape(item.path.name), "", "", f"[red]{len(item.errors)} error(s)[/]")
            continue
        chart = render_mermaid(item.flow)
        if output is not None:
            target = output / f"{item.path.stem}.mmd"
            try:
                target.write_text(chart, encoding="utf-8")
            except OSError as exc:
                raise fail(f"cannot write {target}: {exc}", ExitCode.FAILURE) from None
        if show:
            out.print(f"\n[bold]{escape(item.path.name)}[/]")
            out.print(escape(chart), end="")
        result = "[green]valid, rendered[/]"
        if item.warnings:
            result += f" [yellow]({len(item.warnings)} warning(s): flowtide validate)[/]"
        table.add_row(
            escape(item.path.name), escape(item.flow.label), str(len(item.flow.placements)), result
        )
    out.print(table)
    if output is not None:
        out.print(f"Mermaid charts written to {escape(str(output))}")
    out.print(
        "Running these flows arrives with the engine; for now the demo validates and renders them."
    )
    if broken:
        raise fail(f"{broken} bundled example(s) are invalid", ExitCode.FAILURE)
