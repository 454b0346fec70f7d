"""Handing a call to a worker thread and awaiting it from the loop, with at most one wake-up of
the loop.

The thread puts the answer in the loop's inbox (:class:`flowtide.threads.Reply`): it wakes the
loop unless answers already wait there (then they are taken together), and the loop hears of the
return and settles the awaited future in one callback. A cancelled await withdraws the call only
if it has not started (as ``asyncio.wrap_future`` does), in the awaiting coroutine, so completion
pays nothing for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.threads import Reply

__all__ = ["in_thread"]


async def in_thread(
    pool: NodeThreads, call: Callable[[], Any], returned: Callable[[], None] | None = None
) -> Any:
    """``call()`` in one of ``pool``'s threads; its value (or its error) here. ``returned`` is
    called on the loop once ``call`` has returned, even if this await was cancelled before (a
    call that has started cannot be stopped), or once the call is withdrawn before it started."""
    reply: Reply[Any] = Reply(asyncio.get_running_loop(), returned)
    running = pool.start(call, reply.tell)
    try:
        return await reply.awaited
    except asyncio.CancelledError:
        if running.cancel() and returned is not None:  # (else it runs on, and returns)
            returned()
        raise
