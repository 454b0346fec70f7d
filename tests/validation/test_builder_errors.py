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
