"""Fixtures shared by the engine tests."""

from __future__ import annotations

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
