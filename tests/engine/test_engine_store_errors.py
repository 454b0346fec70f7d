"""A store that fails for a while does not fail runs: a step's commit is tried again after a
backoff, and a store that stays unavailable makes the engine let go of the run, left in the
store as it was, to be resumed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext
from flowtide.engine.errors import StoreUnavailableError
from flowtide.model import Flow
from flowtide.store import Commit, EventRecord, MemoryStore, StoreError
from tests.engine.engine_helpers import T0


class FlakyStore(MemoryStore):
    """Yields to the loop on every commit, and fails the commits numbered in ``failing``
    (1, 2, 3, ... in the order they are sent) without applying anything."""

    def __init__(self, failing: set[int] | None = None, fail_from: int | None = None) -> None:
        super().__init__()
        self.failing = failing or set()
        self.fail_from = fail_from
        self.sent = 0

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        await asyncio.sleep(0)
        self.sent += 1
        down = self.fail_from is not None and self.sent >= self.fail_from
        if self.sent in self.failing or down:
            raise StoreError(f"connection lost (commit {self.sent})")
        return await super().commit(commit)


@node(outputs=["next"])
async def step(ctx: NodeContext) -> str:
    ctx.state.setdefault("seen", []).append(ctx.placement)
    return "next"


def chain() -> Flow:
    return (
        FlowBuilder("urn:test:flow:flaky")
        .task("a", step, {"next": "b"})
        .task("b", step, {"next": "c"})
        .task("c", step, {"next": "end"})
        .terminal("end", "completed")
        .build()
    )


@pytest.mark.parametrize("failing", [{2}, {2, 3}, {3, 4, 5}, {2, 4, 6}])
async def test_commits_that_fail_for_a_while_are_tried_again(failing: set[int]) -> None:
    clock = VirtualClock(T0, autojump=True)
    store = FlakyStore(failing)
    async with Engine(store=store, clock=clock) as engine:
        result = await engine.run(chain())
        history = await engine.history(result.run_id)
    await clock.aclose()
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.state["seen"] == ["a", "b", "c"]  # each node ran once: nothing applied twice
    kinds = [e.kind for e in history]
    assert kinds.count("node_finished") == 3 and kinds.count("run_finished") == 1
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert clock.now() > T0  # the retries waited on the engine's clock


async def test_a_store_that_stays_unavailable_leaves_the_run_as_it_was() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = FlakyStore(fail_from=3)  # the run's start and its first move are committed
    async with Engine(store=store, clock=clock) as engine:
        with pytest.raises(StoreUnavailableError) as caught:
            await engine.run(chain())
        run_id = caught.value.run_id
        stored = await store.get_run(run_id)
        assert stored.lifecycle == Lifecycle.RUNNING.value  # not failed: left for recovery
        before = [e.kind for e in await store.history(run_id)]
        store.fail_from = None  # the store is back: another engine (or this one) resumes it
        handle = await engine.resume(run_id)
        result = await handle.result()
    await clock.aclose()
    assert caught.value.attempts == 5
    assert result.lifecycle is Lifecycle.COMPLETED
    assert before[-1] != "run_finished"
