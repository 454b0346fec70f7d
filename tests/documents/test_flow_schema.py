"""The flow schema (``flowtide schema flow``) says what the loader says about native documents.

Every example and every valid sample, as written, is valid against it; every broken document
whose fault a schema can see is invalid against it, and the loader refuses it too. Documents
are checked as an editor sees them: YAML read as JSON data (a timestamp stays text), and by the
rules of draft 2020-12 and of draft-07 alike (the YAML language server knows draft-07 only).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft7Validator, Draft202012Validator

from flowtide.documents import load_document, load_flow
from flowtide.errors import FlowValidationError
from flowtide.model import Flow, flow_schema, format_duration, node_settings_schema
from tests.documents.samples import FIXTURES, example_flows
from tests.strategies import flows

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "validation" / "samples"
DOCUMENTS = sorted(
    [*example_flows(), *FIXTURES.iterdir(), *(SAMPLES / "good").iterdir()],
    key=lambda p: str(p.relative_to(ROOT)),
)
VALIDATORS = (Draft202012Validator(flow_schema()), Draft7Validator(flow_schema()))
DRAFT_07_KEYWORDS = {
    *("$schema", "$id", "$ref", "title", "description", "default", "examples", "format"),
    *("type", "enum", "const", "pattern", "minLength", "minimum", "exclusiveMinimum", "maximum"),
    *("properties", "additionalProperties", "required", "propertyNames", "minProperties"),
    *("items", "minItems", "uniqueItems", "anyOf", "allOf", "oneOf", "not", "if", "then", "else"),
}
"""Draft-07 keywords (those the schemas use). The schemas also have ``$defs`` (where the
definitions are, found by their pointer) and ``discriminator`` (an OpenAPI hint that JSON
Schema tools ignore)."""


def _as_json(value: Any) -> Any:
    """Data as JSON has it: instants as ISO 8601 text (YAML reads them as datetimes)."""
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_json(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return _as_json(yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text))


def _problems(data: Any) -> list[str]:
    """What each validator finds wrong, all together (empty when both find it valid)."""
    return [f"{e.json_path}: {e.message}" for v in VALIDATORS for e in v.iter_errors(data)]


def _invalid(data: Any) -> bool:
    """Whether every validator finds ``data`` invalid."""
    return all(any(True for _ in v.iter_errors(data)) for v in VALIDATORS)


def _keywords(value: Any) -> set[str]:
    if isinstance(value, list):
        return {k for item in value for k in _keywords(item)}
    if not isinstance(value, dict):
        return set()
    found = set(value)
    for key, item in value.items():
        if key in ("properties", "$defs"):
            found |= {k for schema in item.values() for k in _keywords(schema)}
        elif key not in ("examples", "default", "const", "enum", "discriminator"):
            found |= _keywords(item)
    return found


def test_the_schemas_are_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(flow_schema())
    Draft202012Validator.check_schema(node_settings_schema())


def test_the_schemas_keep_to_what_draft_07_knows() -> None:
    known = DRAFT_07_KEYWORDS | {"$defs", "discriminator"}
    assert _keywords(flow_schema()) <= known
    assert _keywords(node_settings_schema()) <= known


def test_the_schema_speaks_to_users() -> None:
    text = json.dumps([flow_schema(), node_settings_schema()], ensure_ascii=False)
    for word in ("DESIGN", "§", ":mod:", ":func:", "``"):
        assert word not in text


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_and_valid_sample_is_valid(path: Path) -> None:
    loaded = load_document(path)
    if loaded.format == "jsonld":
        # The flow schema describes the native shape: a JSON-LD document is checked by
        # loading it, and the native form of the flow it describes is valid.
        assert _invalid(_read(path))
        assert _problems(loaded.flow.to_data()) == []
    else:
        assert _problems(_read(path)) == []


def _loose(data: dict[str, Any]) -> dict[str, Any]:
    """The same flow in the other forms the loader takes: each single route target as a list,
    each duration in milliseconds when it is a whole number of them."""

    def walk(value: Any, key: str | None = None, parent: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k, key) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        # (A gather's "initial" is the reducer's first value, an output or mapping may be named
        # "deadline": only settings' durations are durations.)
        if key in _DURATIONS and isinstance(value, str) and parent not in _NOT_SETTINGS:
            return _milliseconds(value)
        return value

    out: dict[str, Any] = walk(data)
    for placement in out["placements"]:
        routes = placement.get("routes", {})
        for output, targets in routes.items():
            routes[output] = [targets] if isinstance(targets, str) else targets
    return out


_DURATIONS = {"timeout", "deadline", "duration", "after", "initial", "max", "idle"}
_NOT_SETTINGS = {"gather", "routes", "input", "output", "entrypoints", "reducers", "mapping"}


def _milliseconds(text: str) -> int | str:
    value = load_flow(
        {
            "id": "urn:t:f",
            "entrypoints": {"main": "w"},
            "deadline": text,
            "placements": [{"id": "w", "kind": "terminal"}],
        }
    ).deadline
    assert value is not None
    whole, rest = divmod(value, timedelta(milliseconds=1))
    return text if rest else whole


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(flows())
def test_every_flow_is_valid_in_every_form(flow: Flow) -> None:
    data = flow.to_data()
    assert _problems(data) == []
    from_yaml = _as_json(yaml.safe_load(yaml.safe_dump(data, sort_keys=False)))
    assert _problems(from_yaml) == []
    loose = _loose(data)
    assert _problems(loose) == []
    assert load_flow(loose) == flow


BASE: dict[str, Any] = {
    "id": "urn:test:flow:schema",
    "entrypoints": {"main": "start"},
    "node_types": [{"id": "urn:test:node:start", "outputs": ["ok", "no"]}],
    "reducers": {"results": "append"},
    "deadline": "P1D",
    "placements": [
        {
            "id": "start",
            "kind": "task",
            "node": "urn:test:node:start",
            "routes": {"ok": "pause", "no": ["each", "nested"], "timeout": "failed"},
            "settings": {
                "timeout": "PT10M",
                "timers": [{"after": "PT5M", "output": "no"}],
                "retry": {"max_attempts": 3, "initial": "PT1S"},
            },
        },
        {"id": "pause", "kind": "wait", "duration": "PT1M", "routes": {"elapsed": "merge"}},
        {
            "id": "each",
            "kind": "scatter",
            "source": "items",
            "body": {"node": "urn:test:node:item"},
            "gather": {"strategy": "map", "key": "id"},
            "routes": {
                "all-success": "merge",
                "partial": "merge",
                "all-error": "failed",
                "empty": "merge",
            },
        },
        {
            "id": "nested",
            "kind": "subflow",
            "flow": "urn:test:flow:schema",
            "routes": {"success": "merge", "error": "failed"},
        },
        {
            "id": "merge",
            "kind": "join",
            "mode": "quorum",
            "quorum": 2,
            "routes": {"success": "done", "error": "failed", "empty": "failed"},
        },
        {"id": "setup", "kind": "phase", "phase": "pre", "node": "urn:test:node:setup"},
        {"id": "done", "kind": "terminal"},
        {"id": "failed", "kind": "terminal", "outcome": "failed"},
    ],
}
START, PAUSE, EACH, NESTED, MERGE, SETUP, DONE = range(7)


def _changed(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    change(data)
    return data


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


P = "placements"
ACCEPTED = {
    "a version given as a number": _set(("version",), 2),
    "durations in milliseconds": _set((P, START, "settings", "timeout"), 600_000),
    "a duration as digits": _set((P, PAUSE, "duration"), "1500"),
    "a duration in lower case": _set((P, PAUSE, "duration"), "pt1m"),
    "a wait until an instant": lambda d: d[P][PAUSE].update(
        duration=None, until="2026-01-01T09:30:00+05:30"
    ),
    "a whole number written with a point": _set((P, EACH, "concurrency"), 4.0),
    "a throttle given as a whole number": _set((P, EACH, "throttle"), 2),
    "null for what is optional": _set((P, START, "name"), None),
    "a source function": lambda d: d[P][EACH].update(source=None, source_fn="shop.items:all"),
    "a reducer of the user's": _set(("reducers", "total"), "shop.state:add"),
    "a zero run deadline": _set(("deadline",), "PT0S"),
    "a join's timer routed to its own output": lambda d: d[P][MERGE].update(
        settings={"timers": [{"after": "PT1H", "output": "remind"}]},
        routes={**d[P][MERGE]["routes"], "remind": "done"},
    ),
}


@pytest.mark.parametrize("change", ACCEPTED.values(), ids=list(ACCEPTED))
def test_forms_the_loader_takes_are_valid(change: Callable[[dict[str, Any]], None]) -> None:
    data = _changed(change)
    load_flow(data)
    assert _problems(data) == []


REFUSED = {
    "an unknown field": _set(("colour",), "red"),
    "an unknown placement field": _set((P, START, "colour"), "red"),
    "an unknown setting": _set((P, START, "settings", "timout"), "PT1M"),
    "an unknown kind": _set((P, START, "kind"), "taks"),
    "no kind": _drop((P, START, "kind")),
    "no id": _drop((P, DONE, "id")),
    "no placements": _set((P,), []),
    "placements as a mapping": _set((P,), {"done": {"kind": "terminal"}}),
    "a placement that is text": lambda d: d[P].append("oops"),
    "no entrypoint": _set(("entrypoints",), {}),
    "an entrypoint to nothing": _set(("entrypoints", "main"), ""),
    "an empty version": _set(("version",), ""),
    "a version that is a flag": _set(("version",), True),
    "a name that is a number": _set((P, START, "name"), 42),
    "a route to a number": _set((P, START, "routes", "ok"), 7),
    "a route to no placement": _set((P, START, "routes", "ok"), []),
    "a route to an empty id": _set((P, START, "routes", "ok"), ""),
    "routes as a list": _set((P, START, "routes"), ["pause"]),
    "a wait routing an output it has not": _set((P, PAUSE, "routes", "timeout"), "failed"),
    "a terminal with routes": _set((P, DONE, "routes"), {"ok": "failed"}),
    "a duration in words": _set((P, START, "settings", "timeout"), "ten minutes"),
    "a duration in months": _set(("deadline",), "P1M"),
    "a duration with a unit out of place": _set((P, PAUSE, "duration"), "PT1D"),
    "a zero timeout": _set((P, START, "settings", "timeout"), "PT0S"),
    "a zero timeout in milliseconds": _set((P, START, "settings", "timeout"), 0),
    "a zero wait": _set((P, PAUSE, "duration"), "P0D"),
    "a zero timer": _set((P, START, "settings", "timers", 0, "after"), "PT0.0S"),
    "a negative deadline": _set(("deadline",), -5),
    "a duration that is a flag": _set(("deadline",), True),
    "a duration in fractions of a millisecond": _set(("deadline",), 1.5),
    "a wait with neither duration nor until": _drop((P, PAUSE, "duration")),
    "a wait with both": _set((P, PAUSE, "until"), "2026-01-01T00:00:00Z"),
    "a wait until an instant without a time zone": lambda d: d[P][PAUSE].update(
        duration=None, until="2026-01-01T00:00:00"
    ),
    "a wait until a number": lambda d: d[P][PAUSE].update(duration=None, until=1767225600),
    "a wait until number-like text": lambda d: d[P][PAUSE].update(
        duration=None, until="1767225600"
    ),
    "a scatter with neither source": _drop((P, EACH, "source")),
    "a scatter with both sources": _set((P, EACH, "source_fn"), "shop.items:all"),
    "a source function that is not module:function": lambda d: d[P][EACH].update(
        source=None, source_fn="shop.items.all"
    ),
    "a scatter with a throttle and batches": lambda d: d[P][EACH].update(
        throttle=2, batch={"key": "customer"}
    ),
    "a body with neither node nor flow": _set((P, EACH, "body"), {}),
    "a body with both": _set((P, EACH, "body", "flow"), "urn:test:flow:schema"),
    "a map gather without a key": _drop((P, EACH, "gather", "key")),
    "a map gather with an empty key": _set((P, EACH, "gather", "key"), ""),
    "a reduce gather without a reducer": _set((P, EACH, "gather"), {"strategy": "reduce"}),
    "an unknown gather strategy": _set((P, EACH, "gather", "strategy"), "sum"),
    "a concurrency as text": _set((P, EACH, "concurrency"), "4"),
    "a concurrency of zero": _set((P, EACH, "concurrency"), 0),
    "a concurrency with a fraction": _set((P, EACH, "concurrency"), 2.5),
    "a throttle as text": _set((P, EACH, "throttle"), "2.5"),
    "a quorum join without a quorum": _drop((P, MERGE, "quorum")),
    "a quorum of zero": _set((P, MERGE, "quorum"), 0),
    "a batch size of zero": _set((P, EACH, "batch"), {"key": "customer", "size": 0}),
    "a quorum for another mode": _set((P, MERGE, "mode"), "all"),
    "an unknown join mode": _set((P, MERGE, "mode"), "any"),
    "a phase without a phase": _drop((P, SETUP, "phase")),
    "a task without a node": _drop((P, START, "node")),
    "an empty outcome": _set((P, DONE, "outcome"), ""),
    "an unknown anchor": _set((P, START, "settings", "timeout_anchor"), "nod"),
    "an interrupting flag as a number": _set(
        (P, START, "settings", "timers", 0, "interrupting"), 1
    ),
    "an interrupting flag as text": _set(
        (P, START, "settings", "timers", 0, "interrupting"), "yes"
    ),
    "release_on as text": _set((P, START, "settings", "release_on"), "ok"),
    "no attempts": _set((P, START, "settings", "retry", "max_attempts"), 0),
    "attempts as text": _set((P, START, "settings", "retry", "max_attempts"), "3"),
    "an unknown backoff": _set((P, START, "settings", "retry", "backoff"), "sometimes"),
    "a node type without outputs": _set(("node_types", 0, "outputs"), []),
    "a node type declaring an output twice": _set(("node_types", 0, "outputs"), ["ok", "ok"]),
    "a node type parking as text": _set(("node_types", 0, "parks"), "true"),
    "an unknown reducer": _set(("reducers", "results"), "appendix"),
    "a subflow nesting limit of zero": _set(("max_depth",), 0),
}


@pytest.mark.parametrize("change", REFUSED.values(), ids=list(REFUSED))
def test_what_the_loader_refuses_is_invalid(change: Callable[[dict[str, Any]], None]) -> None:
    data = _changed(change)
    with pytest.raises(FlowValidationError):
        load_flow(data)
    assert _invalid(data)


def test_the_base_document_is_valid() -> None:
    load_flow(BASE)
    assert _problems(BASE) == []


GRAPH_ONLY = {
    # What only the checks of the whole graph (or of warnings) can tell.
    "anchor-warnings.yaml",
    "dead-end.yaml",
    "duplicate-ids.yaml",
    "entrypoint-missing.json",
    "entrypoint-phase.yaml",
    "join-one-branch.json",
    "join-quorum.yaml",
    "no-terminal.json",
    "release-on-unknown.json",
    "route-missing.json",
    "route-to-phase.yaml",
    "timer-unrouted.json",
    "undeclared-node.json",
    "undeclared-output.json",
    "unknown-flow.yaml",
    "unreachable.json",
    "unrouted-output.yaml",
}
NOT_NATIVE = {"entrypoint-phase-only.jsonld", "malformed.json", "malformed.yaml", "expected.yaml"}
BROKEN = sorted((SAMPLES / "broken").iterdir())


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.name)
def test_a_broken_sample_is_invalid_when_a_schema_can_tell(path: Path) -> None:
    if path.name in NOT_NATIVE:
        return
    data = _read(path)
    if path.name in GRAPH_ONLY:
        assert _problems(data) == []
    else:
        assert _invalid(data)


def test_durations_are_written_back_as_the_schema_describes() -> None:
    text = format_duration(timedelta(days=1, hours=2, milliseconds=500))
    assert _problems({**BASE, "deadline": text}) == []
