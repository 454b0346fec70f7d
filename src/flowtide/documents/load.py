"""Loading flow documents: the one way in for the CLI, the server and tests.

Whatever is wrong with the input (unreadable file, malformed text, a bad ``@context``, a bad
structure, a broken graph) comes out as one :class:`~flowtide.errors.FlowValidationError`, each
problem located by a JSON pointer into the source document and, for files, the file's path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowtide.authoring.nodes import NodeRegistry
from flowtide.documents.formats import (
    Format,
    decode,
    format_of_path,
    parse_format,
    parse_text,
    refine,
)
from flowtide.documents.jsonld_reader import read_jsonld
from flowtide.documents.pointers import PointerMap
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow
from flowtide.validation import build_flow

Source = str | os.PathLike[str] | bytes | Mapping[str, Any]
"""A path, document text or bytes, or already-parsed document data."""

_TITLE = "invalid flow document"


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    """A loaded flow, the format it was read from, and the warnings its document raised."""

    flow: Flow
    format: Format
    warnings: tuple[Problem, ...] = ()
    source: str | None = None
    """The file the flow was read from, if it was read from a file."""


def load_document(
    source: Source,
    *,
    format: str | Format | None = None,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> LoadedDocument:
    """Load a flow document, keeping its format and warnings.

    ``source`` is a path (a :class:`~pathlib.Path`, or a string naming a file), document text
    or bytes, or parsed data. A string is text when it holds a line break or starts like a
    document (``{``, ``[``, ``---``), or when ``format`` is given and no such file exists.
    ``catalog`` holds the flows subflows may name; ``registry`` the node implementations.
    """
    fmt = parse_format(format) if format is not None else None
    label: str | None = None
    if isinstance(source, Mapping):
        data: Any = source
        fmt = fmt or Format.JSON
    elif not isinstance(source, str | bytes | os.PathLike):
        what = type(source).__name__
        raise FlowValidationError(
            [Problem(f"a flow document must be an object, a path, text or bytes, not {what}")],
            title=_TITLE,
        )
    else:
        path = _as_path(source, fmt)
        if path is not None:
            label = str(path)
            raw: str | bytes = _read(path)
            fmt = fmt or format_of_path(path)
        else:
            raw = source if isinstance(source, bytes) else str(source)
        text = decode(raw, label)
        fmt = fmt or _sniff(text)
        data = parse_text(text, fmt, label)
    return _build(data, fmt, label, catalog, registry)


def load_flow(
    source: Source,
    *,
    format: str | Format | None = None,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> Flow:
    """The flow a document describes (see :func:`load_document`); warnings are dropped."""
    return load_document(source, format=format, catalog=catalog, registry=registry).flow


def load_flows(
    paths: Iterable[str | os.PathLike[str]],
    *,
    catalog: Mapping[str, Flow] | None = None,
    registry: NodeRegistry | None = None,
) -> dict[str, LoadedDocument]:
    """Load documents that may name each other as subflows; the result is keyed by flow id.

    Each document is read on its own first, then every flow is checked with all of them (and
    ``catalog``) known, so the order of ``paths`` does not matter. Every problem of every
    document is raised together, with the warnings of the documents that did load.
    """
    parsed: list[tuple[Any, Format, str]] = []
    problems: list[Problem] = []
    for item in paths:
        path = Path(item)
        try:
            text = decode(_read(path), str(path))
            fmt = format_of_path(path) or _sniff(text)
            parsed.append((parse_text(text, fmt, str(path)), fmt, str(path)))
        except FlowValidationError as exc:
            problems.extend(exc.problems)
    known: dict[str, Flow] = dict(catalog or {})
    # First pass: every flow without its siblings, to learn their ids (subflow problems aside).
    for data, fmt, _ in parsed:
        flow = _first_pass(data, fmt)
        if flow is not None:
            known.setdefault(flow.id, flow)
    loaded: dict[str, LoadedDocument] = {}
    for data, fmt, label in parsed:
        try:
            doc = _build(data, fmt, label, known, registry)
        except FlowValidationError as exc:
            problems.extend(exc.problems)
            continue
        if doc.flow.id in loaded:
            problems.append(
                Problem(
                    f"flow {doc.flow.id!r} is also defined by {loaded[doc.flow.id].source}",
                    source=label,
                )
            )
            continue
        loaded[doc.flow.id] = doc
    if problems:
        # The documents that did load keep their warnings in the report.
        problems += [w for doc in loaded.values() for w in doc.warnings]
        raise FlowValidationError(problems, title=_TITLE)
    return loaded


def _first_pass(data: Any, fmt: Format) -> Flow | None:
    """The flow in ``data`` read with its subflows unchecked, or ``None``."""
    try:
        native = _native(data, fmt)
        return Flow.model_validate(native.data) if native.data is not None else None
    except (FlowValidationError, ValueError):
        return None


def _as_path(source: str | os.PathLike[str] | bytes, fmt: Format | None) -> Path | None:
    if isinstance(source, bytes):
        return None
    if isinstance(source, os.PathLike):
        return Path(source)
    stripped = source.lstrip()
    if "\n" in source or stripped.startswith(("{", "[", "---")) or not stripped:
        return None
    if fmt is not None and not Path(source).exists():
        return None
    return Path(source)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise FlowValidationError(
            [Problem(f"cannot read the document: {reason}", source=str(path))],
            title="cannot read flow document",
        ) from None


def _sniff(text: str) -> Format:
    return Format.JSON if text.lstrip().startswith(("{", "[")) else Format.YAML


@dataclass(slots=True)
class _Native:
    data: Any
    """Native flow data, ``None`` when the document could not be translated."""
    pointer_map: PointerMap
    format: Format
    problems: list[Problem]


def _native(data: Any, fmt: Format) -> _Native:
    """The native data of a parsed document, whatever its format."""
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else "a list" if isinstance(data, list) else "a scalar"
        raise FlowValidationError(
            [Problem(f"a flow document must be an object, not {kind}")], title=_TITLE
        )
    data = dict(data)
    fmt = refine(fmt, data)
    if fmt is Format.JSONLD:
        translation = read_jsonld(data)
        return _Native(translation.data, translation.pointer_map, fmt, translation.problems)
    return _Native(data, PointerMap.identity(data), fmt, [])


def _build(
    data: Any,
    fmt: Format,
    label: str | None,
    catalog: Mapping[str, Flow] | None,
    registry: NodeRegistry | None,
) -> LoadedDocument:
    try:
        native = _native(data, fmt)
        flow: Flow | None = None
        problems = list(native.problems)
        if native.data is not None:
            flow, later = build_flow(
                native.data, pointer_map=native.pointer_map, catalog=catalog, registry=registry
            )
            problems += later
    except FlowValidationError as exc:
        raise _located(exc.problems, label) from None
    except Exception as exc:  # a bug must still reach the user as a located problem
        raise _located(
            [Problem(f"the document could not be checked: {type(exc).__name__}: {exc}")], label
        ) from exc
    if flow is None or any(p.severity == "error" for p in problems):
        raise _located(problems, label)
    warnings = tuple(p.with_source(label) if label else p for p in problems)
    return LoadedDocument(flow, native.format, warnings, label)


def _located(problems: Iterable[Problem], label: str | None) -> FlowValidationError:
    found = list(problems) or [Problem("the document does not describe a flow")]
    if label:
        found = [p if p.source else p.with_source(label) for p in found]
    return FlowValidationError(found, title=_TITLE)
