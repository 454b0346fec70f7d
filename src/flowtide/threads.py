"""Flowtide's own threads (the SQLite store's thread, the worker threads of sync nodes): how a
job's answer goes back to the event loop, and how they are finished at the interpreter's exit.

An answer goes back with one wake-up of the loop and no futures between the threads
(:class:`Reply`): the thread posts one callback, which settles the future the loop awaits.
The threads are daemons, so a store or an engine that was never closed does not keep its
process alive; still, at the interpreter's exit each one left open finishes the job under way
(:func:`finish_at_exit`), as the standard library's pools do.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import weakref
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

__all__ = ["CANCELLED", "Cancelled", "Finishing", "Reply", "finish_at_exit", "finished"]

T = TypeVar("T")


class Cancelled:
    """The kind of :data:`CANCELLED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CANCELLED"


CANCELLED: Final = Cancelled()
"""The error of a job that never ran (withdrawn, or its threads shut down first)."""


class Reply(Generic[T]):
    """The answer to a job run in another thread, awaited on ``loop`` (:attr:`awaited`). The
    thread gives it once (:meth:`set_result`, :meth:`set_exception`, or :meth:`tell`); on the
    loop, ``then`` (if given) is called, and :attr:`awaited` settled unless whoever waited gave
    up."""

    __slots__ = ("awaited", "loop", "then")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, then: Callable[[], None] | None = None
    ) -> None:
        self.loop = loop
        self.awaited: asyncio.Future[T] = loop.create_future()
        self.then = then
        """Called on the loop when the answer comes, even if nobody waits for it any more."""

    def set_running_or_notify_cancel(self) -> bool:
        """False if whoever waited gave up before the job started (it is then dropped)."""
        return not self.awaited.cancelled()

    def set_result(self, value: T) -> None:
        self.tell(value, None)

    def set_exception(self, error: BaseException | None) -> None:
        self.tell(None, error)

    def tell(self, value: Any, error: BaseException | Cancelled | None) -> None:
        """The job's ``value``, or its ``error`` (:data:`CANCELLED`: it never ran), handed to
        the loop (in the job's thread)."""
        with contextlib.suppress(RuntimeError):  # (the loop is closed: nobody waits)
            self.loop.call_soon_threadsafe(_settle, self, value, error)


def _settle(reply: Reply[Any], value: Any, error: BaseException | Cancelled | None) -> None:
    if reply.then is not None:
        reply.then()
    awaited = reply.awaited
    if awaited.done():  # (whoever waited gave up)
        return
    if error is None:
        awaited.set_result(value)
    elif isinstance(error, Cancelled):
        awaited.cancel()
    elif isinstance(error, StopIteration):  # (a future refuses it: as a generator would)
        awaited.set_exception(RuntimeError("StopIteration raised in a thread (no future holds it)"))
    else:
        awaited.set_exception(error)


class Finishing(Protocol):
    """Threads that can be finished at the interpreter's exit."""

    def finish(self) -> None:
        """Finish the jobs under way (dropping those not started) and end the threads."""


_OPEN: weakref.WeakSet[Finishing] = weakref.WeakSet()


def finish_at_exit(threads: Finishing) -> None:
    """Finish ``threads`` at the interpreter's exit, unless :func:`finished` first."""
    _OPEN.add(threads)


def finished(threads: Finishing) -> None:
    """``threads`` need no finishing at exit any more (shut down)."""
    _OPEN.discard(threads)


@atexit.register
def _finish_open_threads() -> None:
    for threads in list(_OPEN):
        threads.finish()
