"""Reducers and source functions are registered by id (``@flowtide.reducer``,
``@flowtide.source``); the builder takes a function and keeps the id it is registered under."""

from __future__ import annotations

from typing import Any

import pytest

import flowtide
from flowtide.authoring import FlowBuilder, FunctionRegistry, node, reducers, sources
from flowtide.errors import FlowValidationError, NodeResolutionError


@flowtide.reducer
def longest(current: Any, value: Any) -> Any:
    return value if current is None or len(value) > len(current) else current


@flowtide.source(id="tests.authoring:rows")
def rows(ctx: Any) -> list[int]:
    return [1, 2]


def plain_rows(ctx: Any) -> list[int]:
    return [3]


def plain_reducer(current: Any, value: Any) -> Any:
    return value


@node(outputs=["done"], register=False)
def work(ctx: Any) -> str:
    return "done"


def test_the_decorators_register_and_return_the_function() -> None:
    assert longest("ab", "abc") == "abc"  # (the function itself)
    assert reducers.get("tests.authoring.test_functions:longest") is longest
    assert sources.get("tests.authoring:rows") is rows
    assert sources.id_of(rows) == "tests.authoring:rows"
    assert "tests.authoring.test_functions:rows" not in sources


def test_an_id_is_registered_to_one_function() -> None:
    known = FunctionRegistry("reducer", "reducer")
    known.register(plain_reducer, "shop.state:newest")
    known.register(plain_reducer, "shop.state:newest")  # (again: no change)
    with pytest.raises(ValueError, match="already registered"):
        known.register(longest, "shop.state:newest")
    with pytest.raises(NodeResolutionError) as caught:
        known.resolve("os:rename")
    assert str(caught.value) == (
        "reducer 'os:rename' is not registered here: a --nodes module must register it "
        "(with @flowtide.reducer)"
    )
    assert caught.value.refs == ("os:rename",)


def test_the_builder_keeps_the_registered_id_of_a_function() -> None:
    flow = (
        FlowBuilder("urn:test:flow:functions")
        .scatter("each", rows, work, {"all-success": "end"})
        .terminal("end")
        .reducer("best", longest)
        .reducer("results", "extend")
        .build()
    )
    assert flow.placements[0].source_fn == "tests.authoring:rows"  # type: ignore[union-attr]
    assert flow.reducers == {
        "best": "tests.authoring.test_functions:longest",
        "results": "extend",
    }


def test_the_builder_registers_a_module_level_function_it_is_given() -> None:
    flow = (
        FlowBuilder("urn:test:flow:plain")
        .scatter("each", plain_rows, work, {"all-success": "end"})
        .terminal("end")
        .reducer("best", plain_reducer)
        .build()
    )
    ref = "tests.authoring.test_functions:plain_rows"
    assert flow.placements[0].source_fn == ref  # type: ignore[union-attr]
    assert sources.get(ref) is plain_rows
    assert reducers.get("tests.authoring.test_functions:plain_reducer") is plain_reducer


def test_the_builder_refuses_a_function_no_other_process_could_register() -> None:
    with pytest.raises(FlowValidationError, match=r"source function .* has no id"):
        FlowBuilder("urn:test:flow:lambda").scatter("each", lambda ctx: [1], work)
    with pytest.raises(FlowValidationError, match=r"reducer .* has no id"):
        FlowBuilder("urn:test:flow:lambda").reducer("k", lambda a, b: b)


def test_an_id_a_document_could_not_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must read as 'module:function'"):
        flowtide.source(plain_rows, id="urn:shop:source:rows")
    with pytest.raises(ValueError, match="must read as 'module:function'"):
        flowtide.reducer(plain_reducer, id="newest")
