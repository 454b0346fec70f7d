"""``flowtide validate``: check flow documents and name every problem.

A simulation script given among them (``<name>.simulate.yaml``, see ``flowtide simulate``) is
checked as a script, on its own.
"""

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
from flowtide.cli.examples import is_script
from flowtide.cli.loading import Loaded, load_files
from flowtide.errors import FlowValidationError
from flowtide.simulation import load_script


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
    resolve. Without it, no code is imported. A simulation script (a file named
    <name>.simulate.yaml or .json) is checked as a script.
    """
    documents = [f for f in files if not is_script(f)]
    loaded: list[Loaded] = []
    if nodes:
        with current_directory_first():
            code = load_modules(nodes)
            loaded = load_files(documents, code) if documents else []
    elif documents:
        loaded = load_files(documents)
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
    scripts = [f for f in files if is_script(f)]
    for script in scripts:
        errors += _check_script(script, quiet)
    if not quiet:
        count = len(loaded) + len(scripts)
        files_word = "file" if count == 1 else "files"
        style = "red" if errors else "green"
        out.print(
            f"[{style}]{count} {files_word} checked: {errors} error(s), {warnings} warning(s)[/]"
        )
    if errors:
        raise typer.Exit(ExitCode.BAD_INPUT)


def _check_script(path: Path, quiet: bool) -> int:
    """Check a simulation script on its own; its number of errors."""
    try:
        script = load_script(path)
    except FlowValidationError as exc:
        print_problems(exc.problems, out)
        return len(exc.errors)
    if not quiet:
        signals = len(script.signals)
        places = len(script.nodes)
        out.print(
            f"[green]ok[/] {escape(display_path(path))}: a simulation script ({signals} "
            f"signal{'s' if signals != 1 else ''}, {places} scripted "
            f"placement{'s' if places != 1 else ''}); flowtide simulate plays it"
        )
    return 0
