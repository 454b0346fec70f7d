"""Document formats: which one a document is in, and reading its text into data.

JSON-LD is canonical; plain JSON and YAML carry the native shape that :meth:`Flow.to_data` writes.
Any JSON object with an ``@context`` is JSON-LD, whatever its file is called, so that renaming a
file cannot change what it means.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from flowtide.errors import FlowValidationError, Problem


class Format(StrEnum):
    JSONLD = "jsonld"
    JSON = "json"
    YAML = "yaml"


SUFFIXES: dict[str, Format] = {
    ".jsonld": Format.JSONLD,
    ".json-ld": Format.JSONLD,
    ".json": Format.JSON,
    ".yaml": Format.YAML,
    ".yml": Format.YAML,
}

_ALIASES: dict[str, Format] = {
    "jsonld": Format.JSONLD,
    "json-ld": Format.JSONLD,
    "json": Format.JSON,
    "yaml": Format.YAML,
    "yml": Format.YAML,
}


def parse_format(value: str | Format) -> Format:
    """A format from its name (``jsonld``, ``json-ld``, ``json``, ``yaml``, ``yml``)."""
    if isinstance(value, Format):
        return value
    found = _ALIASES.get(value.strip().lower().lstrip("."))
    if found is None:
        raise FlowValidationError(
            [Problem(f"unknown document format {value!r} (use jsonld, json or yaml)")],
            title="cannot read flow document",
        )
    return found


def format_of_path(path: Path) -> Format | None:
    """The format a file's suffix names, if it names one."""
    return SUFFIXES.get(path.suffix.lower())


def refine(fmt: Format, data: Any) -> Format:
    """JSON-LD when the data has an ``@context``, whatever the declared format."""
    if isinstance(data, dict) and "@context" in data:
        return Format.JSONLD
    if fmt is Format.JSONLD:
        return Format.JSON
    return fmt


def decode(raw: str | bytes, source: str | None) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _error(
            f"the document is not UTF-8 text ({exc.reason} at byte {exc.start})", source
        ) from None


def parse_text(text: str, fmt: Format, source: str | None = None) -> Any:
    """The data in ``text``; malformed text raises with its line and column."""
    if fmt is Format.YAML:
        return _parse_yaml(text, source)
    return _parse_json(text, source)


def _parse_json(text: str, source: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source
        ) from None
    except RecursionError:
        raise _error("malformed JSON: the document nests too deeply", source) from None


FAST_YAML_LOADER: type[yaml.CSafeLoader] | None = (
    yaml.CSafeLoader if yaml.__with_libyaml__ else None
)
"""libyaml's safe loader, when PyYAML was built with it: the values of ``SafeLoader``, faster."""


MAX_ALIAS_NODES = 100_000
"""How many nodes (scalars, lists, mappings) the aliases of a YAML document may repeat in all.
An alias repeats the whole node its anchor names, so a 1 KB document of nested aliases can
stand for billions of values; past this many, the document is refused before it is read."""


def _parse_yaml(text: str, source: str | None) -> Any:
    """The data in YAML ``text``, read by libyaml when PyYAML has it.

    Both loaders build the same values from the same text, but for a few corners: libyaml also
    takes tabs where YAML allows them and PyYAML's own reader does not (after a value, say),
    reads an empty value tagged ``!`` as empty text rather than null, and drops a byte order
    mark inside the text, which PyYAML keeps (text with one is read by PyYAML).

    When libyaml refuses a document, PyYAML's own loader reads it again, so that what is wrong
    is said, line and column included, exactly as without libyaml (and a document only libyaml
    refuses still loads).
    """
    fast = FAST_YAML_LOADER is not None and "\ufeff" not in text
    if "&" in text:  # (without an anchor there is no alias to expand)
        _check_aliases(text, FAST_YAML_LOADER if fast else yaml.SafeLoader, source)
    if FAST_YAML_LOADER is not None and fast:
        try:
            return yaml.load(text, Loader=FAST_YAML_LOADER)
        except (yaml.YAMLError, RecursionError):
            pass
    return _parse_yaml_slowly(text, source)


_COLLECTION_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_COLLECTION_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _check_aliases(text: str, loader: Any, source: str | None) -> None:
    """Refuse ``text`` if its aliases repeat more than :data:`MAX_ALIAS_NODES` nodes in all, or
    if an alias names a node it is inside of (a value that contains itself): counted on the
    parser's events, each anchored node's size once, so the count costs what reading does.
    Text the parser refuses is left to the loader, which says where it is wrong."""
    sizes: dict[str, int] = {}
    """Anchor -> how many nodes its node holds, itself included (aliases expanded)."""
    open_nodes: list[list[Any]] = []
    """The collections being read, outermost first: [anchor, nodes so far]."""
    repeated = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, _COLLECTION_STARTS):
                open_nodes.append([event.anchor, 1])
                continue
            if isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "")
                if size is None:
                    if any(anchor == event.anchor for anchor, _ in open_nodes):
                        raise _alias_error(event, "names a node it is inside of", source)
                    continue  # (an unknown alias: the loader says so)
                repeated += size
                if repeated > MAX_ALIAS_NODES:
                    raise _alias_error(
                        event,
                        f"repeats more than {MAX_ALIAS_NODES:,} nodes, with the aliases "
                        "before it: a document may not expand to that much",
                        source,
                    )
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    sizes[event.anchor] = size
            elif isinstance(event, _COLLECTION_ENDS):
                anchor, size = open_nodes.pop()
                if anchor is not None:
                    sizes[anchor] = size
            else:
                continue
            if open_nodes:
                open_nodes[-1][1] += size
    except yaml.YAMLError:
        return


def _alias_error(event: Any, what: str, source: str | None) -> FlowValidationError:
    mark = event.start_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return _error(f"YAML{where}: the alias *{event.anchor} {what}", source)


def _parse_yaml_slowly(text: str, source: str | None) -> Any:
    try:
        return yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "unreadable"
        raise _error(f"malformed YAML{where}: {what}", source) from None
    except yaml.YAMLError as exc:
        raise _error(f"malformed YAML: {exc}", source) from None
    except RecursionError:
        raise _error("malformed YAML: the document nests too deeply", source) from None


def _error(message: str, source: str | None) -> FlowValidationError:
    problem = Problem(message)
    if source:
        problem = problem.with_source(source)
    return FlowValidationError([problem], title="cannot read flow document")
