"""A flow names code only by registered ids: a stored document naming a module's function
(``builtins:exec``, ``os:rename``, ``os:system``, an undecorated function) as a reducer, a
source or a node is refused by every engine, and nothing of it runs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide.authoring import node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext
from flowtide.errors import NodeResolutionError
from flowtide.model import Flow
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import T0, of_kind


@node(id="urn:test:node:set-path", outputs=["done"])
def set_path(ctx: NodeContext) -> str:
    """Writes the state keys a reducer merges: ``path`` (the file's new name) and ``gateway``."""
    ctx.state["path"] = ctx.state["renamed"]
    ctx.state["gateway"] = {}
    return "done"


touched: list[Any] = []


def undecorated(ctx: Any) -> str:
    """A function of this module that is not registered as a node."""
    touched.append(ctx)
    return "done"


def document(kind: str, ref: str) -> Flow:
    first: dict[str, Any] = {"id": "work", "kind": "task", "node": "urn:test:node:set-path"}
    first["routes"] = {"done": "end"}
    data: dict[str, Any] = {"id": "urn:test:flow:refs", "entrypoints": {"main": "work"}}
    if kind == "reducer":
        data["reducers"] = {"path": ref, "gateway": ref}
    elif kind == "node":
        first["node"] = ref
    else:
        first = {
            "id": "work",
            "kind": "scatter",
            "source_fn": ref,
            "body": {"node": "urn:test:node:set-path"},
            "routes": {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"},
        }
    data["placements"] = [first, {"id": "end", "kind": "terminal"}]
    return Flow.model_validate(data)


CASES = [
    ("reducer", "builtins:exec"),
    ("reducer", "os:rename"),
    ("reducer", "os:system"),
    ("source", "builtins:exec"),
    ("source", "os:rename"),
    ("source", "os:system"),
    ("node", "builtins:exec"),
    ("node", "os:rename"),
    ("node", "os:system"),
    ("node", f"{__name__}:undecorated"),
    ("source", f"{__name__}:undecorated"),
    ("reducer", f"{__name__}:undecorated"),
]


def initial_state(tmp_path: Path) -> dict[str, Any]:
    """A file to rename (``os:rename`` as a reducer would rename it to ``renamed``) and code to
    run (``builtins:exec`` as a reducer would run it, writing ``mark``)."""
    original = tmp_path / "original"
    original.write_text("keep me")
    mark = tmp_path / "mark"
    return {
        "path": str(original),
        "renamed": str(tmp_path / "renamed"),
        "gateway": f"import pathlib; pathlib.Path({str(mark)!r}).touch()",
    }


def nothing_ran(tmp_path: Path) -> None:
    assert (tmp_path / "original").read_text() == "keep me"
    assert not (tmp_path / "renamed").exists()
    assert not (tmp_path / "mark").exists()
    assert touched == []


@pytest.mark.parametrize(("kind", "ref"), CASES)
async def test_an_engine_refuses_to_start_it(tmp_path: Path, kind: str, ref: str) -> None:
    store = MemoryStore()
    async with Engine(clock=VirtualClock(T0, autojump=True), store=store) as engine:
        with pytest.raises(NodeResolutionError) as caught:
            await engine.start(document(kind, ref), initial_state(tmp_path))
    assert ref in caught.value.refs
    assert caught.value.nodes == ((ref,) if kind == "node" else ())
    assert f"{ref!r} is not registered here: a --nodes module must register it" in str(caught.value)
    assert await store.list_runs() == []
    nothing_ran(tmp_path)


@pytest.mark.parametrize(("kind", "ref"), CASES)
async def test_a_worker_leaves_a_stored_run_of_it_untouched(
    tmp_path: Path, kind: str, ref: str
) -> None:
    clock = VirtualClock(T0)
    store = MemoryStore()
    client = Engine(clock=clock, store=store, executes=False)  # (anyone who can write the store)
    run_id = (await client.start(document(kind, ref), initial_state(tmp_path))).run_id
    worker = Engine(clock=clock, store=store)  # registers set-path, and nothing else
    worker.sweeper  # noqa: B018
    await clock.settle()
    await clock.advance(timedelta(seconds=60))
    await clock.settle()
    run = await store.get_run(run_id)
    assert run.lifecycle == Lifecycle.PENDING
    history = await store.history(run_id)
    (warning,) = of_kind(history, "warning")
    assert f"{ref!r} is not registered here" in warning.data["message"]
    assert not of_kind(history, "node_started")
    nothing_ran(tmp_path)
    await worker.close()
    await client.close()


async def test_the_same_flow_with_registered_code_runs(tmp_path: Path) -> None:
    # (What the refusals above would have done: set-path runs and writes both keys.)
    async with Engine(clock=VirtualClock(T0, autojump=True)) as engine:
        result = await engine.run(
            document("node", "urn:test:node:set-path"), initial_state(tmp_path)
        )
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["path"] == str(tmp_path / "renamed")
