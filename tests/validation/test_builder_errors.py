"""Mistakes in a flow built in Python raise :class:`FlowValidationError` naming the placement."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.errors import FlowValidationError


@node(outputs=["ok", "bad"], register=False)
def check(ctx: Any) -> str:
    return "ok"


@node(outputs=["go"], register=False)
def split(ctx: Any) -> str:
    return "go"


def _build_error(builder: FlowBuilder) -> FlowValidationError:
    with pytest.raises(FlowValidationError) as info:
        builder.build()
    return info.value


def test_route_to_a_missing_placement() -> None:
    error = _build_error(
        FlowBuilder("urn:test:b")
        .task("check", check, {"ok": "end", "bad": "recover"})
        .terminal("end")
    )
    (problem,) = error.errors
    assert problem.placement == "check"
    assert problem.pointer == "/placements/0/routes/bad"
    assert "'recover', which does not exist" in problem.message
    assert "'check'" in str(error)


def test_unreachable_placement() -> None:
    error = _build_error(
        FlowBuilder("urn:test:b")
        .task("check", check, {"ok": "end", "bad": "end"})
        .wait("forgotten", "PT1M", then="end")
        .terminal("end")
    )
    (problem,) = error.errors
    assert problem.placement == "forgotten"
    assert "placement 'forgotten' cannot be reached from any entrypoint" in str(error)


def test_join_with_one_branch() -> None:
    error = _build_error(
        FlowBuilder("urn:test:b")
        .task("check", check, {"ok": "merge", "bad": "end"})
        .join("merge", "all", {"success": "end", "error": "end", "empty": "end"})
        .terminal("end")
    )
    (problem,) = error.errors
    assert problem.placement == "merge"
    assert "join 'merge' has 1 incoming branch (from 'check' on 'ok')" in str(error)


def test_every_mistake_is_reported_at_once() -> None:
    error = _build_error(
        FlowBuilder("urn:test:b")
        .task("check", check, {"ok": "merge", "bad": "nowhere"})
        .join("merge", "all", {"success": "end", "error": "end", "empty": "end"})
        .wait("forgotten", "PT1M", then="end")
        .task("spin", split, {"go": "spin"})
        .terminal("end")
        .entrypoint("main", "check")
        .entrypoint("loop", "spin")
    )
    assert sorted(p.placement or "" for p in error.errors) == [
        "check",
        "forgotten",
        "merge",
        "spin",
    ]


def test_warnings_do_not_stop_a_build() -> None:
    flow = (
        FlowBuilder("urn:test:b")
        .task("check", check, {"ok": "end"})
        .task("other", "urn:test:node:elsewhere", {"done": "end"})
        .terminal("end")
        .entrypoint("main", "check")
        .entrypoint("side", "other")
        .build()
    )
    assert flow.has_placement("other")


# -- a scatter's source ---------------------------------------------------------------------------


def rows(ctx: Any) -> list[int]:
    """A source function importable by its reference."""
    return [1, 2]


@pytest.mark.parametrize(
    ("source", "source_fn"),
    [("items", "tests.validation.test_builder_errors:rows"), (None, None)],
    ids=["both", "neither"],
)
def test_a_scatter_needs_exactly_one_source(source: str | None, source_fn: str | None) -> None:
    with pytest.raises(FlowValidationError) as info:
        FlowBuilder("urn:test:b").scatter(
            "each", source, "urn:test:node:item", {"all-success": "end"}, source_fn=source_fn
        )
    (problem,) = info.value.errors
    assert problem.placement == "each"
    assert "a scatter needs exactly one of 'source' (a state path) and 'source_fn'" in str(
        info.value
    )
    assert "placement 'each'" in str(info.value)


def test_a_source_function_is_kept_by_its_reference() -> None:
    flow = (
        FlowBuilder("urn:test:b")
        .scatter("by-fn", rows, "urn:test:node:item", {"all-success": "by-ref"})
        .scatter(
            "by-ref",
            None,
            "urn:test:node:item",
            {"all-success": "end"},
            source_fn="tests.validation.test_builder_errors:rows",
        )
        .terminal("end")
        .build()
    )
    refs = [p.get("source_fn") for p in flow.to_data()["placements"]]
    assert refs == ["tests.validation.test_builder_errors:rows"] * 2 + [None]


def test_a_source_function_that_cannot_be_imported_is_refused() -> None:
    def nested(ctx: Any) -> list[int]:
        return []

    for fn in (nested, lambda ctx: []):
        with pytest.raises(FlowValidationError, match="define it at a module's top level") as info:
            FlowBuilder("urn:test:b").scatter("each", fn, "urn:test:node:item")
        assert info.value.errors[0].placement == "each"


def test_a_source_function_given_twice_is_refused() -> None:
    with pytest.raises(FlowValidationError, match="one source function, not two") as info:
        FlowBuilder("urn:test:b").scatter(
            "each",
            rows,
            "urn:test:node:item",
            source_fn="tests.validation.test_builder_errors:rows",
        )
    assert info.value.errors[0].placement == "each"


def test_a_source_function_reference_must_read_module_function() -> None:
    with pytest.raises(FlowValidationError) as info:
        FlowBuilder("urn:test:b").scatter("each", None, "urn:test:node:item", source_fn="rows")
    (problem,) = info.value.errors
    assert problem.placement == "each"
    assert "'source_fn' must be a 'module:function' reference, not 'rows'" in problem.message
    assert problem.message.endswith("at 'source_fn'")
