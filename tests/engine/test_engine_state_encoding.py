"""A value a step writes to the run state is encoded as JSON once, where the step ends: the
store writes that text (on every store), and a run's input is encoded once too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Output
from tests.engine.engine_helpers import running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

DOC = {"title": "report", "pages": [{"n": 1, "tags": ["a"]}, {"n": 2, "tags": []}]}
NOTE = ["checked", {"by": "robot"}]
made: dict[str, Any] = {}


@node(outputs=["next"])
def write(ctx: NodeContext) -> str:
    made["doc"] = ctx.state["doc"] = json.loads(json.dumps(DOC))
    return "next"


@node(outputs=["next"])
def note(ctx: NodeContext) -> Output:
    made["note"] = json.loads(json.dumps(NOTE))
    return Output("next", update={"note": made["note"]})


@node(outputs=["next"])
def leave(ctx: NodeContext) -> str:
    ctx.state["count"] = ctx.state.get("count", 0) + 1
    return "next"


async def test_each_value_a_run_keeps_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[int] = []
    encode = json.JSONEncoder.encode  # (what json.dumps and the stores' one encoder both call)

    def counting(self: json.JSONEncoder, value: Any) -> str:
        encoded.append(id(value))
        return encode(self, value)

    b = FlowBuilder("urn:test:flow:encoded-once")
    b.task("write", write, {"next": "note"}).task("note", note, {"next": "leave"})
    flow = b.task("leave", leave, {"next": "end"}).terminal("end").build()
    given = {"input": {"items": [1, 2, 3]}}
    async with running(flows=[flow]) as (engine, _):
        monkeypatch.setattr(json.JSONEncoder, "encode", counting)
        result = await engine.run(flow, given)
        monkeypatch.undo()
        assert result.lifecycle == Lifecycle.COMPLETED
        assert (await engine.store.get_state(result.run_id)) == {
            **given,
            "doc": DOC,
            "note": NOTE,
            "count": 1,
        }
    for value in (given["input"], made["doc"], made["note"]):
        assert encoded.count(id(value)) == 1, value
