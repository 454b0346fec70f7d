"""Keys and ids a store indexes are checked by the engine before anything is stored, the same on
every store: a node that makes a park key (or a state key) no store can keep fails its attempt,
naming the value, through its retry like any node failure (never a store that looks down, a
run let go and taken again for ever); a start or a signal with one raises and stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Lifecycle, NodeContext, Output, Park
from flowtide.engine.state.limits import MAX_ID_BYTES, MAX_KEY_BYTES, InvalidKeyError
from flowtide.model import Flow
from flowtide.store.jsonvalues import NotJSONError
from tests.engine.engine_helpers import of_kind, running

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)

LONG = "k" * 3_000
KEYS = {"fine": "order-1", "long": LONG, "nul": "order\x00-1", "surrogate": "order-\ud800"}
"""The keys nodes make, by name (the state holds the name: a state value is JSON text)."""
BAD_KEYS = [
    ("long", "is 3,000 bytes long, over the limit of 1,024"),
    ("nul", "has a NUL character"),
    ("surrogate", "is not valid Unicode text"),
]


@node(outputs=["done"], parks=True, register=False)
async def parks_under(ctx: NodeContext) -> Any:
    if ctx.signal is not None:
        return "done"
    return Park(key=KEYS[ctx.state["key"]])


@node(outputs=["done"], register=False)
async def writes_key(ctx: NodeContext) -> Output:
    return Output("done", update={KEYS[ctx.state["key"]]: 1})


def flow(impl: Any, **options: Any) -> Flow:
    return (
        FlowBuilder(f"urn:test:flow:keys-{impl.id}")
        .task("call", impl, {"done": "end"}, **options)
        .terminal("end")
        .build()
    )


@pytest.mark.parametrize(("key", "why"), BAD_KEYS, ids=["long", "nul", "surrogate"])
async def test_a_park_key_no_store_keeps_fails_the_attempt(key: str, why: str) -> None:
    retry = {"backoff": "fixed", "initial": "PT1S", "max_attempts": 3}
    async with running() as (engine, _clock):
        fine = await engine.run(flow(parks_under, retry=retry), {"key": "fine"})
        assert fine.lifecycle is Lifecycle.PARKED
        failed = await engine.run(flow(parks_under, retry=retry), {"key": key})
        history = await engine.history(failed.run_id)
        parks = await engine.parks(failed.run_id)
    assert failed.lifecycle is Lifecycle.FAILED
    (error,) = failed.errors
    assert error.type == "InvalidKeyError" and error.placement == "call"
    assert error.message.startswith("park key ") and why in error.message
    assert len(of_kind(history, "node_failed")) == 3  # retried as any failure
    assert len(of_kind(history, "node_retried")) == 2
    assert parks == []


async def test_a_state_key_no_store_keeps_fails_the_attempt() -> None:
    async with running() as (engine, _clock):
        with pytest.raises(InvalidKeyError, match="input key"):
            await engine.run(flow(writes_key), {LONG: 1})
        result = await engine.run(flow(writes_key), {"key": "nul"})
        stored = await engine.store.get_state(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    assert result.errors[0].message.startswith("update key 'order\\x00-1' has a NUL")
    assert stored == {"key": "nul"}


async def test_a_run_id_or_a_signal_key_no_store_keeps_is_refused_before_anything() -> None:
    async with running() as (engine, _clock):
        with pytest.raises(InvalidKeyError, match=r"run id .* over the limit of 255"):
            await engine.start(flow(parks_under), {"key": "x"}, run_id="r" * (MAX_ID_BYTES + 1))
        assert await engine.store.list_runs() == []
        parked = await engine.run(flow(parks_under), {"key": "fine"}, run_id="r" * MAX_ID_BYTES)
        assert parked.lifecycle is Lifecycle.PARKED
        with pytest.raises(InvalidKeyError, match="idempotency key"):
            await engine.signal(key="order-1", idempotency_key="i" * (MAX_KEY_BYTES + 1))
        with pytest.raises(InvalidKeyError, match=r"^key 'o\\x00k' has a NUL"):
            await engine.signal(key="o\x00k")
        with pytest.raises(InvalidKeyError, match="payload key"):
            await engine.signal(key="order-1", payload={"\x00": 1})
        receipt = await engine.signal(key="order-1", idempotency_key="i" * MAX_KEY_BYTES)
        assert not receipt.duplicate
        result = await engine.wait(parked.run_id)
    assert result.lifecycle is Lifecycle.COMPLETED


@node(outputs=["done"], register=False)
async def writes_surrogate(ctx: NodeContext) -> Output:
    return Output("done", update={"note": "caf\udce9"})


async def test_text_that_is_not_unicode_fails_the_attempt_as_not_json() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(flow(writes_surrogate))
        with pytest.raises(NotJSONError, match=r"input/name: .*a lone surrogate"):
            await engine.start(flow(writes_surrogate), {"name": "\ud800"})
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert error.type == "NotJSONError" and error.placement == "call"
    assert error.message == (
        "update/note: a string holds '\\udce9', a lone surrogate, which is not Unicode text"
    )
