"""Handing a call to a worker thread and awaiting it from the loop, with one wake-up of the loop.

The thread wakes the loop once, and that one callback hears of the return and settles the
awaited future. A cancelled await withdraws the call only if it has not started (as
``asyncio.wrap_future`` does), in the awaiting coroutine, so completion pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from flowtide.engine.worker.nodethreads import CANCELLED, NodeThreads

__all__ = ["in_thread"]


async def in_thread(
    pool: NodeThreads, call: Callable[[], Any], returned: Callable[[], None] | None = None
) -> Any:
    """``call()`` in one of ``pool``'s threads; its value (or its error) here. ``returned`` is
    called on the loop once ``call`` has returned, even if this await was cancelled before (a
    call that has started cannot be stopped), or once the call is withdrawn before it started."""
    loop = asyncio.get_running_loop()
    awaited: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: object) -> None:
        if returned is not None:
            returned()
        if awaited.done():  # (the await was cancelled)
            return
        if error is None:
            awaited.set_result(value)
        elif error is CANCELLED:  # (the pool shut down before it ran)
            awaited.cancel()
        elif isinstance(error, StopIteration):  # (a future refuses it: as a generator would)
            awaited.set_exception(RuntimeError("a node raised StopIteration"))
        else:
            assert isinstance(error, BaseException)
            awaited.set_exception(error)

    def done(value: Any, error: object) -> None:  # (in the worker thread)
        with contextlib.suppress(RuntimeError):  # (the loop is closed: nobody waits)
            loop.call_soon_threadsafe(settle, value, error)

    running = pool.start(call, done)
    try:
        return await awaited
    except asyncio.CancelledError:
        if running.cancel() and returned is not None:  # (else it runs on, and returns)
            returned()
        raise
