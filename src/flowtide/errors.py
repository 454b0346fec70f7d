"""Errors Flowtide raises to its users.

Every problem with a flow (a document, a builder call, a settings value) is reported through one
type, :class:`FlowValidationError`, which carries *all* the problems found, each located by a JSON
pointer into the source document or by a placement id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]


class FlowtideError(Exception):
    """Base class of every error Flowtide raises on purpose."""

    def details(self) -> dict[str, Any]:
        """The error's own fields as JSON values, kept with it on a run's result (the message
        says the same for people)."""
        return {}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong (or suspicious) about a flow.

    ``pointer`` is a JSON pointer (RFC 6901) into the source document, ``""`` for the whole
    document. ``placement`` names the placement the problem is about, when there is one.
    """

    message: str
    pointer: str = ""
    placement: str | None = None
    severity: Severity = "error"
    source: str | None = field(default=None, compare=False)

    @property
    def location(self) -> str:
        """Where the problem is, in one short string (file, pointer, placement)."""
        parts: list[str] = []
        if self.source:
            parts.append(self.source)
        if self.pointer:
            parts.append(self.pointer)
        if self.placement and f"/{self.placement}" not in self.pointer:
            parts.append(f"placement {self.placement!r}")
        return " ".join(parts) if parts else "(document)"

    def __str__(self) -> str:
        return f"{self.severity}: {self.location}: {self.message}"

    def with_source(self, source: str) -> Problem:
        return Problem(self.message, self.pointer, self.placement, self.severity, source)


class FlowValidationError(FlowtideError, ValueError):
    """A flow or a flow document is invalid.

    ``problems`` holds every problem found (errors first, then warnings); the message lists them.
    """

    def __init__(self, problems: Iterable[Problem], *, title: str = "invalid flow") -> None:
        ordered = sorted(problems, key=lambda p: (p.severity != "error", p.pointer, p.message))
        self.problems: Sequence[Problem] = tuple(ordered)
        self.title = title
        lines = [f"{title}: {len(self.errors)} error(s)"]
        lines.extend(f"  - {p}" for p in self.problems)
        super().__init__("\n".join(lines))

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")


class NodeResolutionError(FlowtideError, LookupError):
    """Code a flow names is not registered here: a node (``@node``), a reducer
    (``@flowtide.reducer``) or a scatter's source function (``@flowtide.source``). A flow names
    code only by the id it is registered under; nothing is imported because a flow names it.

    ``refs`` holds the references that do not resolve (node ids, reducer and source ids), each
    once, in the order they were found; ``nodes`` those of them that name nodes."""

    def __init__(
        self, message: str, refs: Iterable[str] = (), *, nodes: Iterable[str] = ()
    ) -> None:
        super().__init__(message)
        self.nodes: tuple[str, ...] = tuple(dict.fromkeys(nodes))
        self.refs: tuple[str, ...] = tuple(dict.fromkeys([*refs, *self.nodes]))
