"""Reading flow documents for the CLI: every file at once, problems located per file."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flowtide.authoring.nodes import NodeRegistry
from flowtide.cli.code import Code, reference_problems
from flowtide.documents import Format, LoadedDocument, load_flows
from flowtide.documents.formats import decode, parse_text
from flowtide.documents.jsonld_reader import read_jsonld
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow


@dataclass
class Loaded:
    """One file: the flow read from it (``None`` when it has errors) and its problems."""

    path: Path
    flow: Flow | None
    problems: list[Problem] = field(default_factory=list)
    jsonld: bool = False
    """Whether the document is JSON-LD (pointers into the native shape must be mapped to it)."""

    def pointers(self) -> Callable[[str], str] | None:
        """Native pointer -> pointer into this document (``None`` when it cannot be told)."""
        return _jsonld_pointers(self.path) if self.jsonld else _same

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]


def load_files(
    paths: Sequence[Path], code: Code | None = None, catalog: Mapping[str, Flow] | None = None
) -> list[Loaded]:
    """Load every file, each checked with all the others known (so subflows resolve), and the
    flows of ``catalog`` (flows stored already, say).

    Every problem of every file is kept, warnings included: when some files have errors, the
    others are loaded again on their own to collect their warnings.

    With ``code`` (the user's modules), each flow is checked against it too: a route must take
    an output the implementation declares, and every reference to code must resolve (an error
    at the placement that makes it, otherwise).
    """
    if code is None:
        return _load_files(paths, None, catalog)
    loaded = _load_files(paths, code.registry(), catalog)
    known = len(code.nodes)
    found = {
        str(item.path): reference_problems(item.flow, code, item.pointers())
        for item in loaded
        if item.flow is not None
    }
    if len(code.nodes) > known:
        # References resolved to implementations whose outputs the routes must now match.
        loaded = _load_files(paths, code.registry(), catalog)
    for item in loaded:
        errors = [p.with_source(str(item.path)) for p in found.get(str(item.path), ())]
        # A node that does not resolve is not declared either: its error says more.
        places = {(p.pointer, p.placement) for p in errors}
        item.problems = [
            p
            for p in item.problems
            if p.severity == "error" or (p.pointer, p.placement) not in places
        ]
        item.problems.extend(errors)
        item.problems.sort(key=_order)
    return loaded


def _order(problem: Problem) -> tuple[bool, str, str]:
    return (problem.severity != "error", problem.pointer, problem.message)


def _load_files(
    paths: Sequence[Path], registry: NodeRegistry | None, catalog: Mapping[str, Flow] | None
) -> list[Loaded]:
    paths = list(dict.fromkeys(paths))
    loaded = {str(path): Loaded(path, None) for path in paths}
    problems, documents = _load(paths, registry, catalog)
    failing = {p.source for p in problems if p.severity == "error"}
    remaining = [path for path in paths if str(path) not in failing]
    while failing and remaining:
        # The other files may name flows of failing ones: load them again without those, and
        # keep only their warnings (their errors come from the failing files).
        again, documents = _load(remaining, registry, catalog)
        problems += [p for p in again if p.severity == "warning"]
        failing = {p.source for p in again if p.severity == "error"}
        before = len(remaining)
        remaining = [path for path in remaining if str(path) not in failing]
        if len(remaining) == before:
            break
    for doc in documents.values():
        if doc.source in loaded:
            loaded[doc.source].flow = doc.flow
            loaded[doc.source].jsonld = doc.format is Format.JSONLD
            problems += doc.warnings
    orphans: list[Problem] = []
    # A problem found twice (a warning of a file loaded again) is kept once: a set per file,
    # so that a flow of 100,000 placements costs no more per problem than one of ten.
    seen: dict[str, set[Problem]] = {key: set(item.problems) for key, item in loaded.items()}
    for problem in problems:
        key = problem.source or ""
        item = loaded.get(key)
        if item is None:
            orphans.append(problem)
        elif problem not in seen[key]:
            seen[key].add(problem)
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
        item.problems.sort(key=_order)
    return list(loaded.values())


def _load(
    paths: Sequence[Path], registry: NodeRegistry | None, catalog: Mapping[str, Flow] | None
) -> tuple[list[Problem], dict[str, LoadedDocument]]:
    try:
        return [], load_flows(paths, registry=registry, catalog=catalog)
    except FlowValidationError as exc:
        return list(exc.problems), {}


def _same(pointer: str) -> str:
    return pointer


def _jsonld_pointers(path: Path) -> Callable[[str], str] | None:
    """The map from pointers into a JSON-LD document's native translation to the document."""
    try:
        text = decode(path.read_bytes(), str(path))
        fmt = Format.YAML if path.suffix.lower() in (".yaml", ".yml") else Format.JSON
        data = parse_text(text, fmt, str(path))
        return read_jsonld(data).pointer_map if isinstance(data, dict) else None
    except Exception:  # the document loaded already: without a map, problems name placements
        return None
