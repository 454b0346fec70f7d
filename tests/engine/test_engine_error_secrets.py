"""Errors keep no secrets and have a size: every error a run records (its result, its history,
a scatter item's record, a hook's failure) goes through the engine's redaction hook first, and
its message, traceback and details are cut to size. On every store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, Lifecycle, NodeContext, redact_errors
from flowtide.engine.redaction import MAX_DETAILS, MAX_MESSAGE, MAX_TRACEBACK
from flowtide.model import Flow
from flowtide.store.base import EventRecord
from tests.engine.engine_helpers import running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

SECRET = "sk-live-4242"


def hide(text: str) -> str:
    return text.replace(SECRET, "[secret]")


class Leaky(Exception):
    def details(self) -> dict[str, Any]:
        return {"url": f"https://api.test/?key={SECRET}", "tries": 3}


@node(outputs=["next"], register=False)
async def leaks(ctx: NodeContext) -> str:
    try:
        raise ConnectionError(f"refused with key={SECRET}")
    except ConnectionError as exc:
        raise Leaky(f"the call with {SECRET} failed") from exc


@node(outputs=["next"], register=False)
async def huge(ctx: NodeContext) -> str:
    raise ValueError("start " + "x" * 2_000_000 + " end")


class Bloated(Exception):
    def details(self) -> dict[str, Any]:
        return {"rows": list(range(100_000))}


@node(outputs=["next"], register=False)
async def bloated(ctx: NodeContext) -> str:
    raise Bloated("too much detail")


@node(outputs=["next"], register=False)
def deep(ctx: NodeContext) -> str:
    cause: Exception | None = None
    for n in range(400):  # a chain of 400 causes: a traceback of some 2,800 lines
        try:
            raise LookupError(f"cause {n}") from cause
        except LookupError as exc:
            cause = exc
    raise RuntimeError("at the bottom") from cause


@node(outputs=["done"], register=False)
async def item_leaks(ctx: NodeContext) -> str:
    raise Leaky(f"item {ctx.item} with {SECRET}")


def one_node(impl: Any) -> Flow:
    return (
        FlowBuilder(f"urn:test:flow:errors-{impl.id}")
        .task("call", impl, {"next": "end"})
        .terminal("end")
        .build()
    )


def everything(result: Any, history: Any, run: Any) -> str:
    """All the run keeps, as text."""
    events = [e.data for e in history]
    return json.dumps([result.to_dict(), events, run.result], default=str)


@pytest.fixture
def no_registered_hook() -> Iterator[None]:
    yield
    redact_errors(None)


async def test_a_secret_in_a_message_its_cause_and_details_is_never_stored() -> None:
    async with running(redact=hide) as (engine, _clock):
        result = await engine.run(one_node(leaks))
        history = await engine.history(result.run_id)
        run = await engine.store.get_run(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert error.message == "the call with [secret] failed"
    assert error.details == {"url": "https://api.test/?key=[secret]", "tries": 3}
    assert error.traceback is not None and "refused with key=[secret]" in error.traceback
    kept = everything(result, history, run)
    assert SECRET not in kept and "[secret]" in kept


async def test_the_hook_registered_for_the_process_serves_engines_given_none(
    no_registered_hook: None,
) -> None:
    redact_errors(hide)
    async with running() as (engine, _clock):
        result = await engine.run(one_node(leaks))
        history = await engine.history(result.run_id)
        run = await engine.store.get_run(result.run_id)
    assert SECRET not in everything(result, history, run)


async def test_a_hook_that_raises_withholds_the_text() -> None:
    def broken(text: str) -> str:
        raise KeyError(text)

    async with running(redact=broken) as (engine, _clock):
        result = await engine.run(one_node(leaks))
        history = await engine.history(result.run_id)
        run = await engine.store.get_run(result.run_id)
    assert result.errors[0].message == "(withheld: the redaction hook raised KeyError)"
    assert SECRET not in everything(result, history, run)


async def test_a_scatter_items_error_and_a_hooks_failure_are_redacted() -> None:
    def failing_hook(event: EventRecord) -> None:
        if event.kind == "run_started":
            raise RuntimeError(f"hook saw {SECRET}")

    routes = {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"}
    flow = (
        FlowBuilder("urn:test:flow:errors-scatter")
        .scatter("each", "numbers", item_leaks, routes, gather={"strategy": "partition"})
        .terminal("end")
        .build()
    )
    async with running(redact=hide, hooks=[failing_hook]) as (engine, _clock):
        result = await engine.run(flow, {"numbers": [1, 2]})
        history = await engine.history(result.run_id)
        run = await engine.store.get_run(result.run_id)
        items = await engine.store.scatter_items(result.run_id, "each#1")
    assert result.lifecycle is Lifecycle.COMPLETED
    assert [r.result["error"] for r in items] == [
        "Leaky: item 1 with [secret]",
        "Leaky: item 2 with [secret]",
    ]
    assert any(e.kind == "hook_failed" for e in history)
    assert SECRET not in everything(result, history, run)


async def test_a_huge_message_is_cut_keeping_its_start() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_node(huge))
        history = await engine.history(result.run_id)
    (error,) = result.errors
    assert error.message.startswith("start xxx")
    assert len(error.message) < MAX_MESSAGE + 100
    assert "more characters" in error.message
    failed = [e for e in history if e.kind == "node_failed"]
    assert failed[0].data["error"]["message"] == error.message
    assert error.traceback is not None and len(error.traceback) < MAX_TRACEBACK + 100


async def test_a_long_traceback_keeps_its_start_and_its_end() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_node(deep))
    trace = result.errors[0].traceback
    assert trace is not None and len(trace) < MAX_TRACEBACK + 100
    assert trace.startswith("Traceback (most recent call last):")
    assert "characters cut" in trace and "LookupError: cause 0" in trace
    assert trace.rstrip().endswith("RuntimeError: at the bottom")


async def test_details_too_large_are_replaced_by_a_note() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_node(bloated))
    (error,) = result.errors
    assert list(error.details) == ["omitted"]
    assert f"over {MAX_DETAILS:,}" in error.details["omitted"]
    assert Engine(redact=hide).redact is hide
