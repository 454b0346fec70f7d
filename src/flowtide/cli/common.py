"""What the CLI's commands share: exit codes, consoles, printing problems, error handling."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from enum import IntEnum
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer
from rich import markup
from rich.console import Console

from flowtide.errors import FlowValidationError, Problem
from flowtide.printable import printable
from flowtide.store.base import StoreUnusableError

P = ParamSpec("P")
R = TypeVar("R")


class ExitCode(IntEnum):
    """What ``flowtide`` exits with."""

    OK = 0
    """Done, and nothing was wrong (warnings allowed)."""
    FAILURE = 1
    """Flowtide itself failed (an internal error, a file it could not write)."""
    BAD_INPUT = 2
    """The input is at fault: a missing or unreadable file, an invalid flow, a bad option, a
    store that cannot be opened, a run that does not exist."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT) or SIGTERM while waiting; what it waited on is kept."""
    REFUSED = 3
    """The run refused what was asked: a signal that could not apply (the park expired, the
    token moved on, ...), a cancel of a run that had ended."""
    PENDING = 4
    """A signal or cancel is recorded in the store but no worker answered it in time: it is
    applied when a worker takes the run."""


class BadInput(Exception):
    """A mistake in what the user gave a command (an option's value, their code, a reference):
    its message, one line, is printed on stderr and the command exits with 2."""


EXIT_CODES_HELP = (
    "Exit codes: 0 ok (warnings allowed) · 1 failure (internal error, output not written, a "
    "run that did not complete) · 2 bad input (missing or unreadable file, invalid flow, bad "
    "option, your code that cannot be imported or found, a store that cannot be opened, an "
    "unknown run) · 3 refused (a signal that cannot apply, a cancel of a run that ended)."
)

NodesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--nodes",
        "-n",
        metavar="MODULE",
        help="A module of yours that implements nodes (repeatable), imported as python -m "
        "would: from the current directory first. The @node implementations it defines or "
        "registers, and those listed in its NODES, implement the nodes the flow names.",
        show_default=False,
    ),
]
"""``--nodes MODULE``, for the commands that import the user's code."""

WithOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--with",
        "-w",
        metavar="OTHER",
        help="Another document whose flow a subflow or a scatter of FILE runs (repeatable).",
        show_default=False,
    ),
]
"""``--with OTHER``, for the commands that read one flow and the flows it names."""

DEBUG_VARIABLE = "FLOWTIDE_DEBUG"
"""Set it to 1 to let an unexpected exception show its traceback."""

# No emoji codes: an IRI such as 'urn:x:work' must not print as 'urn❌work'.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def escape(text: str) -> str:
    """``text`` as one value on one line of human output: its control characters written as
    Python writes them (an id with a newline cannot forge a row or a line) and Rich's markup
    escaped. Text meant to span lines (a traceback) takes ``rich.markup.escape`` alone."""
    return markup.escape(printable(text))


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    """Print ``message`` on stderr and return the exit to raise."""
    err.print(f"[bold red]flowtide:[/] {escape(message)}")
    return typer.Exit(code)


def guarded(command: Callable[P, R]) -> Callable[P, R]:
    """Turn an unexpected exception into one line on stderr and exit code 1 (no traceback).

    A traceback is shown when ``FLOWTIDE_DEBUG=1``.
    """

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except FlowValidationError as exc:
            print_problems(exc.problems)
            raise fail(exc.title) from None
        except BadInput as exc:
            raise fail(str(exc)) from None
        except StoreUnusableError as exc:  # (damaged, read-only: the user must act on it)
            raise fail(str(exc)) from None
        except Exception as exc:
            if os.environ.get(DEBUG_VARIABLE) == "1":
                raise
            raise fail(
                f"internal error: {type(exc).__name__}: {exc} "
                f"(set {DEBUG_VARIABLE}=1 to see the traceback)",
                ExitCode.FAILURE,
            ) from None

    return wrapper


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# -- printing ----------------------------------------------------------------------------------


def where(problem: Problem) -> str:
    """The pointer and placement of a problem, without the file."""
    parts: list[str] = []
    if problem.pointer:
        parts.append(problem.pointer)
    if problem.placement and f"/{problem.placement}" not in problem.pointer:
        parts.append(f"placement {problem.placement!r}")
    return " ".join(parts) if parts else "(document)"


def problem_line(problem: Problem) -> str:
    """``file: severity: pointer placement: sentence`` (plain text)."""
    source = f"{problem.source}: " if problem.source else ""
    return f"{source}{problem.severity}: {where(problem)}: {problem.message}"


def print_problems(problems: Sequence[Problem], console: Console | None = None) -> None:
    target = console or err
    for problem in problems:
        style = "red" if problem.severity == "error" else "yellow"
        source = f"{escape(problem.source)}: " if problem.source else ""
        target.print(
            f"{source}[{style}]{problem.severity}[/]: [cyan]{escape(where(problem))}[/]: "
            f"{escape(problem.message)}"
        )
