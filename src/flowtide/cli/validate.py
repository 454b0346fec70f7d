"""``flowtide validate``: check flow documents and name every problem."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from flowtide.cli.code import current_directory_first, load_modules
from flowtide.cli.common import (
    ExitCode,
    NodesOption,
    display_path,
    guarded,
    out,
    print_problems,
)
from flowtide.cli.loading import load_files


@guarded
def validate(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="Flow documents (JSON-LD, JSON or YAML). They are read together, so a "
            "subflow in one may name a flow of another.",
            show_default=False,
        ),
    ],
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print problems only, no summary.")
    ] = False,
    nodes: NodesOption = None,
) -> None:
    """Check flow documents: print every error and warning with its location.

    Each problem names its file, a JSON pointer into the document and the placement it is
    about, then says what is wrong in a sentence. Warnings do not change the exit code.

    With --nodes, the flows are checked against your code as run would use it: routes against
    the outputs the implementations declare, and every node, source function and reducer must
    resolve. Without it, no code is imported.
    """
    if nodes:
        with current_directory_first():
            loaded = load_files(files, load_modules(nodes))
    else:
        loaded = load_files(files)
    errors = warnings = 0
    for item in loaded:
        print_problems(item.problems, out)
        errors += len(item.errors)
        warnings += len(item.warnings)
        if item.flow is not None and not item.errors and not quiet:
            flow = item.flow
            out.print(
                f"[green]ok[/] {escape(display_path(item.path))}: {escape(flow.id)} "
                f"(v{escape(flow.version)}, {len(flow.placements)} placements)"
            )
    if not quiet:
        files_word = "file" if len(loaded) == 1 else "files"
        style = "red" if errors else "green"
        out.print(
            f"[{style}]{len(loaded)} {files_word} checked: {errors} error(s), "
            f"{warnings} warning(s)[/]"
        )
    if errors:
        raise typer.Exit(ExitCode.BAD_INPUT)
