"""``flowtide render``: draw a flow as a Mermaid flowchart."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from flowtide.cli.common import (
    ExitCode,
    WithOption,
    display_path,
    err,
    fail,
    guarded,
    print_problems,
)
from flowtide.cli.loading import load_files
from flowtide.render.mermaid import render_mermaid


class Direction(StrEnum):
    TB = "TB"
    TD = "TD"
    BT = "BT"
    LR = "LR"
    RL = "RL"


@guarded
def render(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="A flow document (JSON-LD, JSON or YAML).", show_default=False
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the chart to this file instead of stdout."),
    ] = None,
    direction: Annotated[
        Direction,
        typer.Option(
            "--direction",
            "-d",
            case_sensitive=False,
            metavar="TB|LR|BT|RL|TD",
            help="Top to bottom (TB, the default) or left to right (LR), and so on.",
        ),
    ] = Direction.TB,
    others: WithOption = None,
) -> None:
    """Render a flow as a Mermaid flowchart (one shape per placement kind, labelled edges)."""
    loaded = load_files([file, *(others or [])])
    item = loaded[0]
    bad = [display_path(each.path) for each in loaded if each.flow is None]
    if bad or item.flow is None:
        for each in loaded:
            print_problems(each.problems)
        what = "is not a valid flow" if len(bad) == 1 else "are not valid flows"
        raise fail(f"{', '.join(bad)} {what}; nothing rendered")
    if item.warnings:
        count = len(item.warnings)
        err.print(
            f"{escape(display_path(file))}: {count} warning(s); "
            "[bold]flowtide validate[/] lists them"
        )
    text = render_mermaid(item.flow, direction=direction.value)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {output}: {exc}", ExitCode.FAILURE) from None
    err.print(f"wrote {display_path(output)}")
