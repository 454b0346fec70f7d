"""Fixtures shared by the engine tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from flowtide.engine.run import RunExecutor


@pytest.fixture
def general_steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The placements whose node ran through the general path (``_node_step``)."""
    seen: list[str] = []
    original = RunExecutor._node_step

    async def spy(self: RunExecutor, token: Any, p: Any, *args: Any) -> Any:
        seen.append(p.id)
        return await original(self, token, p, *args)

    monkeypatch.setattr(RunExecutor, "_node_step", spy)
    yield seen


class BranchTasks:
    """What drives a split's threaded branches: ``branch_tasks(True)`` gives them tasks, as
    before carriers; ``branch_tasks(False)`` (the default) carriers, each counted in
    ``carried`` (the placement it drives)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.carried: list[str] = []
        self._monkeypatch = monkeypatch
        self._original = RunExecutor._carry
        self(False)

    def __call__(self, tasks: bool) -> None:
        carried, original = self.carried, self._original

        def counting(ex: RunExecutor, t: Any, loop: asyncio.AbstractEventLoop) -> None:
            carried.append(t.placement)
            original(ex, t, loop)

        def as_task(ex: RunExecutor, t: Any, loop: asyncio.AbstractEventLoop) -> None:
            ex._tasks.add(loop.create_task(ex._drive(t)))

        self._monkeypatch.setattr(RunExecutor, "_carry", as_task if tasks else counting)


@pytest.fixture
def branch_tasks(monkeypatch: pytest.MonkeyPatch) -> BranchTasks:
    return BranchTasks(monkeypatch)
