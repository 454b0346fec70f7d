"""Property: whatever the input, validation reports problems and never raises anything else.

Random JSON-like values, and valid documents broken by random mutations (keys deleted, values
replaced by other types, kinds renamed, routes pointed elsewhere, garbage durations), go to
``build_flow``; their text goes to ``load_flow``, which may only raise ``FlowValidationError``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowtide.documents import load_flow
from flowtide.errors import FlowValidationError, Problem
from flowtide.model import KIND_NAMES, Flow
from flowtide.validation import build_flow, check_flow

GOOD = Path(__file__).parent / "samples" / "good"
DOCUMENTS: list[dict[str, Any]] = [
    yaml.safe_load(p.read_text(encoding="utf-8"))
    for p in sorted(GOOD.iterdir())
    if p.suffix in (".json", ".yaml")
]

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
DURATIONS = (
    st.sampled_from(
        ["PT0S", "-PT1M", "P1Y", "P1M", "PT", "P", "10", "-5", "PT10X", "P99999999999999D", "", " "]
    )
    | st.integers(min_value=-(10**25), max_value=10**25)
    | st.floats()
    | st.text(max_size=6)
)
TOP_KEYS = st.sampled_from(
    ["id", "entrypoints", "placements", "node_types", "reducers", "deadline", "max_depth"]
)

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_reported(data: Any) -> None:
    flow, problems = build_flow(data)
    assert all(isinstance(p, Problem) for p in problems)
    assert all(p.pointer == "" or p.pointer.startswith("/") for p in problems)
    assert all(p.message and p.severity in ("error", "warning") for p in problems)
    errors = [p for p in problems if p.severity == "error"]
    assert (flow is None) == bool(errors)
    if flow is not None:
        assert isinstance(flow, Flow)
        assert [p for p in check_flow(flow) if p.severity == "error"] == []


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*here, key))
            found.extend(_paths(item, (*here, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*here, index))
            found.extend(_paths(item, (*here, index)))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        key = path[-1]
        action = draw(st.sampled_from(["delete", "replace", "kind", "route", "duration", "top"]))
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = draw(JSON_LIKE)
        elif action == "kind" and isinstance(parent, dict) and "kind" in parent:
            parent["kind"] = draw(st.sampled_from(KIND_NAMES) | st.text(max_size=6) | SCALARS)
        elif action == "route" and isinstance(parent, dict):
            placements = doc.get("placements") if isinstance(doc, dict) else None
            listed = placements if isinstance(placements, list) else []
            ids = [p.get("id") for p in listed if isinstance(p, dict)]
            parent[key] = draw(st.sampled_from([*ids, "ghost", ""]) | st.lists(st.text(max_size=3)))
        elif action == "duration" and isinstance(parent, dict):
            field = draw(st.sampled_from(["timeout", "duration", "after", "deadline", "initial"]))
            parent[field] = draw(DURATIONS)
        elif action == "top" and isinstance(doc, dict):
            doc[draw(TOP_KEYS)] = draw(JSON_LIKE)
    return doc


@FAST
@given(JSON_LIKE)
def test_any_json_like_value_gives_problems(data: Any) -> None:
    _assert_reported(data)


@FAST
@given(st.dictionaries(TOP_KEYS, JSON_LIKE, max_size=5))
def test_any_top_level_mapping_gives_problems(data: dict[str, Any]) -> None:
    _assert_reported(data)


@FAST
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["id", "kind", "routes", "node", "settings"]), JSON_LIKE),
        max_size=4,
    )
)
def test_any_placements_give_problems(placements: list[dict[str, Any]]) -> None:
    _assert_reported({"id": "urn:x", "entrypoints": {"main": "a"}, "placements": placements})


@settings(max_examples=150, deadline=None)
@given(mutated())
def test_mutated_documents_give_problems(data: Any) -> None:
    _assert_reported(data)


@FAST
@given(mutated(), st.sampled_from(["json", "yaml"]))
def test_mutated_document_text_only_raises_flow_validation_error(data: Any, fmt: str) -> None:
    text = json.dumps(data) if fmt == "json" else yaml.safe_dump(data)
    _assert_loads_or_reports(text, fmt)


@FAST
@given(st.text(max_size=60), st.sampled_from(["json", "yaml"]))
def test_any_text_only_raises_flow_validation_error(text: str, fmt: str) -> None:
    _assert_loads_or_reports(text, fmt)


def _assert_loads_or_reports(text: str, fmt: str) -> None:
    try:
        load_flow(text, format=fmt)
    except FlowValidationError as exc:
        assert exc.problems
        # The loader turns an unexpected exception into this problem: there must be none.
        assert not any("could not be checked" in p.message for p in exc.problems)
