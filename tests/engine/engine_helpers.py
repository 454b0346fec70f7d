"""Shared helpers for the engine tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.authoring import FlowBuilder, node
from flowtide.authoring.nodes import NodeImplementation
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, NodeContext, Output, RunResult
from flowtide.model import Flow
from flowtide.store import EventRecord, MemoryStore, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)

StoreMaker = Callable[[], Store]
"""Makes a fresh store (not opened yet) of the kind the test runs on."""

store_kind: list[StoreMaker] = []
"""The kind of store tests run on now (set by the ``every_store`` fixture; empty: memory)."""


def fresh_store() -> Store:
    """A fresh store of the kind the test runs on (memory, SQLite or PostgreSQL)."""
    return store_kind[0]() if store_kind else MemoryStore()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def freeze(engine: Engine) -> None:
    """``engine`` stops renewing its leases and looking at due entries, as a worker that froze
    or lost the store does; the nodes it runs go on. (A worker stops only by closing: this
    closes two of its parts alone.)"""
    engine.held.renewer.close()
    await engine.sweeper.close()


@asynccontextmanager
async def running(
    autojump: bool = True, *, clock: VirtualClock | None = None, **options: Any
) -> AsyncIterator[tuple[Engine, VirtualClock]]:
    if clock is None:
        clock = VirtualClock(T0, autojump=autojump)
    made = "store" not in options
    if made:
        options["store"] = fresh_store()
    engine = Engine(clock=clock, **options)
    try:
        yield engine, clock
    finally:
        await engine.close()
        if made:
            await options["store"].close()
        await clock.aclose()


@asynccontextmanager
async def two_engines(
    flow: Flow, *, autojump: bool, **options: Any
) -> AsyncIterator[tuple[Engine, Engine, VirtualClock, Store]]:
    """Two engines on one store and one clock (as two processes on one database): ``a`` knows no
    flow (it runs what it is given), ``b`` has ``flow`` registered (it can rebuild its runs).
    ``options`` go to both. Both are closed at the end."""
    clock = VirtualClock(T0, autojump=autojump)
    store = fresh_store()
    a = Engine(clock=clock, store=store, **options)
    b = Engine(clock=clock, store=store, flows=[flow], **options)
    try:
        yield a, b, clock, store
    finally:
        await a.close()
        await b.close()
        await store.close()
        await clock.aclose()


def raw_flow(placements: Sequence[dict[str, Any]], **fields: Any) -> Flow:
    """A flow built from plain data, without the graph checks (for deliberately broken flows)."""
    data: dict[str, Any] = {"id": "urn:test:flow:raw", "placements": list(placements)}
    data.setdefault("entrypoints", {"main": placements[0]["id"]})
    data.update(fields)
    return Flow.model_validate(data)


def kinds(events: Sequence[EventRecord], *, placement: str | None = None) -> list[str]:
    return [e.kind for e in events if placement is None or e.placement == placement]


def of_kind(events: Sequence[EventRecord], kind: str) -> list[EventRecord]:
    return [e for e in events if e.kind == kind]


def comparable(result: RunResult, history: Sequence[EventRecord]) -> Any:
    """What two runs of one flow must agree on (run ids, which differ, masked): the result and
    every event but its seq, which must count from 1."""
    rid = result.run_id

    def plain(value: Any) -> Any:
        return value.replace(rid, "<run>") if isinstance(value, str) else value

    events = [
        (
            e.kind,
            e.at,
            e.placement,
            e.attempt,
            plain(e.token_id),
            repr(e.data).replace(rid, "<run>"),
        )
        for e in history
    ]
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    return (
        result.lifecycle,
        result.outcome,
        result.state,
        [(e.type, e.message.replace(rid, "<run>"), e.placement) for e in result.errors],
        result.interrupted_at,
        [(p.placement, p.key.replace(rid, "<run>") if p.key else None) for p in result.parked],
        result.terminals,
        events,
    )


async def run_comparable(
    flow: Flow,
    *,
    hooked: bool,
    deadline: timedelta | datetime | str | int | None = None,
    **options: Any,
) -> tuple[Any, list[str]]:
    """Run ``flow`` once (``hooked``: with a hook that records every event; ``deadline``: the
    run's; ``options``: the engine's): what two runs of it must agree on (:func:`comparable`),
    and the placements whose attempts started. A hook sees every event the history holds, in
    its order."""
    seen: list[str] = []
    hooks: list[Callable[[EventRecord], None]] = [lambda e: seen.append(e.kind)] if hooked else []
    async with running(hooks=hooks, **options) as (engine, _clock):
        result = await engine.run(flow, deadline=deadline)
        history = list(await engine.history(result.run_id))
    if hooked:
        assert seen == [e.kind for e in history]
    started = [e.placement for e in history if e.kind == "node_started" and e.placement]
    return comparable(result, history), started


@node(outputs=["done"])
async def instant(ctx: NodeContext) -> Output:
    """An async branch node that does not wait: records its placement in ``visited``."""
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"], execution="inline")
def inline(ctx: NodeContext) -> Output:
    """A sync branch node run on the loop: records its placement in ``visited``."""
    return Output("done", update={"visited": [ctx.placement]})


@node(outputs=["done"], execution="inline")
def mark(ctx: NodeContext) -> Output:
    """Records its placement in ``visited`` (a list the split flows extend)."""
    return Output("done", update={"visited": [ctx.placement]})


def split_of(
    kinds: list[NodeImplementation],
    mode: str = "all",
    quorum: int | None = None,
    *,
    name: str = "branches",
) -> Flow:
    """A split into one branch per node of ``kinds`` (placements ``b0``, ``b1``, ...), joined by
    ``mode``, then a task and a terminal (``name`` starts the flow's id)."""
    names = [f"b{i}" for i in range(len(kinds))]
    shape = "-".join(k.id.rsplit(":", 1)[-1] for k in kinds)
    b = FlowBuilder(f"urn:test:flow:{name}-{mode}-{shape}")
    b.task("fork", mark, {"done": names})
    for placement, impl in zip(names, kinds, strict=True):
        b.task(placement, impl, {"done": "j"})
    b.join("j", mode, {"success": "after"}, quorum=quorum)
    b.task("after", mark, {"done": "end"})
    return b.terminal("end").reducer("visited", "extend").build()


def branches_finished(history: Sequence[EventRecord]) -> list[str]:
    """The branches (``b0``, ``b1``, ...) of a :func:`split_of` flow whose node finished, in
    order."""
    return [
        e.placement
        for e in history
        if e.kind == "node_finished" and e.placement is not None and e.placement.startswith("b")
    ]
