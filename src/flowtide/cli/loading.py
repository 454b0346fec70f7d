"""Reading flow documents for the CLI: every file at once, problems located per file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flowtide.documents import LoadedDocument, load_flows
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow


@dataclass
class Loaded:
    """One file: the flow read from it (``None`` when it has errors) and its problems."""

    path: Path
    flow: Flow | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]


def load_files(paths: Sequence[Path]) -> list[Loaded]:
    """Load every file, each checked with all the others known (so subflows resolve).

    Every problem of every file is kept, warnings included: when some files have errors, the
    others are loaded again on their own to collect their warnings.
    """
    paths = list(dict.fromkeys(paths))
    loaded = {str(path): Loaded(path, None) for path in paths}
    problems, documents = _load(paths)
    failing = {p.source for p in problems if p.severity == "error"}
    remaining = [path for path in paths if str(path) not in failing]
    while failing and remaining:
        # The other files may name flows of failing ones: load them again without those, and
        # keep only their warnings (their errors come from the failing files).
        again, documents = _load(remaining)
        problems += [p for p in again if p.severity == "warning"]
        failing = {p.source for p in again if p.severity == "error"}
        before = len(remaining)
        remaining = [path for path in remaining if str(path) not in failing]
        if len(remaining) == before:
            break
    for doc in documents.values():
        if doc.source in loaded:
            loaded[doc.source].flow = doc.flow
            problems += doc.warnings
    orphans: list[Problem] = []
    for problem in problems:
        item = loaded.get(problem.source or "")
        if item is None:
            orphans.append(problem)
        elif problem not in item.problems:
            item.problems.append(problem)
    if orphans:  # a problem not tied to one file belongs to every file
        for item in loaded.values():
            item.problems.extend(orphans)
    for item in loaded.values():
        if item.flow is None and not item.errors:
            item.problems.append(
                Problem(
                    "this document could not be checked on its own: a flow it names is in a "
                    "document with errors",
                    source=str(item.path),
                )
            )
        item.problems.sort(key=lambda p: (p.severity != "error", p.pointer, p.message))
    return list(loaded.values())


def _load(paths: Sequence[Path]) -> tuple[list[Problem], dict[str, LoadedDocument]]:
    try:
        return [], load_flows(paths)
    except FlowValidationError as exc:
        return list(exc.problems), {}
