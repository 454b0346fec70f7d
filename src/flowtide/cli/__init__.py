"""The ``flowtide`` command line.

Commands: ``validate``, ``render``, ``run``, ``simulate``, ``schema``, ``demo``; ``python -m
flowtide`` runs it too. Exit codes: 0 ok, 1 failure, 2 bad input.
"""

from __future__ import annotations

from flowtide.cli.app import app
from flowtide.cli.common import ExitCode


def main() -> None:
    """Run the ``flowtide`` command (the console script)."""
    app(prog_name="flowtide")


__all__ = ["ExitCode", "app", "main"]
