"""Handing a call to a worker thread and awaiting it from the loop, with one wake-up of the loop.

``asyncio.wrap_future`` costs a threaded step three callbacks on the loop besides the task's own
wake-up (the result copied over, a cancel check on every completion, and a second wake-up from
the thread for whoever must hear the call returned). Here the thread wakes the loop once, and
that one callback hears of the return and settles the awaited future; a cancelled await cancels
the call only if it has not started (as ``wrap_future`` does), in the awaiting coroutine, so
completion pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["in_thread"]


async def in_thread(
    pool: Executor, call: Callable[[], Any], returned: Callable[[], None] | None = None
) -> Any:
    """``call()`` in one of ``pool``'s threads; its value (or its error) here. ``returned`` is
    called on the loop once ``call`` has returned, even if this await was cancelled before (a
    call that has started cannot be stopped), or once the call is cancelled before it started."""
    loop = asyncio.get_running_loop()
    awaited: asyncio.Future[Any] = loop.create_future()

    def settle(running: Future[Any]) -> None:
        if returned is not None:
            returned()
        if awaited.done():  # (the await was cancelled)
            return
        if running.cancelled():
            awaited.cancel()
            return
        error = running.exception()
        if error is None:
            awaited.set_result(running.result())
        elif isinstance(error, StopIteration):  # (a future refuses it: as a generator would)
            awaited.set_exception(RuntimeError("a node raised StopIteration"))
        else:
            awaited.set_exception(error)

    def done(running: Future[Any]) -> None:  # (in the worker thread)
        with contextlib.suppress(RuntimeError):  # (the loop is closed: nobody waits)
            loop.call_soon_threadsafe(settle, running)

    running = pool.submit(call)
    running.add_done_callback(done)
    try:
        return await awaited
    except asyncio.CancelledError:
        running.cancel()  # (only if it has not started: else it runs on, and returns)
        raise
