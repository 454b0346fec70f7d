"""Waiting in turn, alone: first come first served, a cancelled waiter leaves the queue, and one
cancelled as it is handed its turn passes it on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from flowtide.turns import Turns


async def test_turns_are_handed_in_order_and_passed_on_when_cancelled() -> None:
    turns: Turns[str] = Turns()
    handed: list[str] = []
    passed: list[str] = []

    def passes_on(who: str) -> Callable[[], None]:
        return lambda: passed.append(who)

    waiters = {who: asyncio.ensure_future(turns.wait(who, passes_on(who))) for who in "abcd"}
    await asyncio.sleep(0)
    assert len(turns) == 4 and turns.waiting == 4
    waiters["b"].cancel()  # (leaves the queue: never handed)
    await asyncio.sleep(0)
    assert len(turns) == 3 and turns.waiting == 3
    assert turns.hand(handed.append) and handed == ["a"]
    await waiters["a"]
    assert turns.hand(handed.append) and handed == ["a", "c"]
    waiters["c"].cancel()  # (handed its turn as it was cancelled: passes it on)
    await asyncio.gather(waiters["c"], return_exceptions=True)
    assert passed == ["c"]
    assert turns.hand(handed.append) and handed == ["a", "c", "d"]
    await waiters["d"]
    assert not turns.hand(handed.append) and len(turns) == 0
