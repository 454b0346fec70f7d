"""Whatever a document holds, loading it raises FlowValidationError or nothing."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flowtide.documents import load_document, to_jsonld
from flowtide.errors import FlowValidationError
from tests.documents.samples import fixture_document, rich_data, rich_flow
from tests.strategies import json_values

_DOCUMENTS = [fixture_document(), to_jsonld(rich_flow()), rich_data()]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*path, index))
    return found


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = draw(st.sampled_from(_DOCUMENTS))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, draw(json_values | st.sampled_from(["@id", "@type", "@json"])))
    return doc


@settings(max_examples=150, deadline=None)
@given(mutated())
def test_mutated_documents_fail_cleanly(doc: Any) -> None:
    try:
        loaded = load_document(doc) if isinstance(doc, dict) else None
    except FlowValidationError as exc:
        assert exc.errors
        for problem in exc.errors:
            assert problem.pointer == "" or problem.pointer.startswith("/")
            assert "could not be checked" not in problem.message, problem
        return
    if loaded is not None:
        assert loaded.flow.placements
