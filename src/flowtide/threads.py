"""Flowtide's own threads (the SQLite store's thread, the worker threads of sync nodes): how a
job's answer goes back to the event loop, and how they are finished at the interpreter's exit.

An answer goes back with no futures between the threads (:class:`Reply`): the thread puts it in
its loop's inbox (:class:`Inbox`), and the loop settles the future it awaits. Answers that arrive
together wake the loop once: an answer given while the loop has not yet taken the ones before it
rides with them, so a batch of answers (a group of writes, a fan-out of nodes) costs one wake-up
of the loop, not one each.
The threads are daemons, so a store or an engine that was never closed does not keep its
process alive; still, at the interpreter's exit each one left open finishes the job under way
(:func:`finish_at_exit`), as the standard library's pools do.
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

__all__ = [
    "CANCELLED",
    "Cancelled",
    "Finishing",
    "Inbox",
    "Reply",
    "finish_at_exit",
    "finished",
]

T = TypeVar("T")


class Cancelled:
    """The kind of :data:`CANCELLED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CANCELLED"


CANCELLED: Final = Cancelled()
"""The error of a job that never ran (withdrawn, or its threads shut down first)."""


class Inbox:
    """The answers handed to one loop from other threads, taken on the loop in batches: the
    first answer of a batch wakes the loop; those given before the loop takes them ride along.

    (Thread-safe without a lock: ``waking`` is cleared on the loop before the answers are
    taken, so an answer put after the last one taken finds it clear and wakes the loop again;
    at worst two threads both wake it, and the second wake-up finds nothing.)"""

    __slots__ = ("_answers", "_waking", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._answers: deque[tuple[Reply[Any], Any, BaseException | Cancelled | None]] = deque()
        self._waking = False

    @property
    def waiting(self) -> int:
        """How many answers wait for the loop to take them."""
        return len(self._answers)

    def put(self, reply: Reply[Any], value: Any, error: BaseException | Cancelled | None) -> None:
        """(In any thread.) ``reply``'s answer, settled on the loop soon."""
        self._answers.append((reply, value, error))
        if not self._waking:
            self._waking = True
            try:
                self.loop.call_soon_threadsafe(self._take)
            except RuntimeError:  # (the loop is closed: nobody waits, nothing to keep)
                self._waking = False
                self._answers.clear()

    def _take(self) -> None:
        self._waking = False
        answers = self._answers
        while answers:
            reply, value, error = answers.popleft()
            try:
                _settle(reply, value, error)
            except Exception as exc:  # (a ``then`` that fails: the answers after it still go)
                self.loop.call_exception_handler(
                    {"message": "a reply's callback failed", "exception": exc}
                )


_LAST: list[Inbox] = []
"""The inbox made last, which the next reply takes if it is its loop's (most programs run one
loop). Loops that take turns each get new ones, each correct on its own."""


class Reply(Generic[T]):
    """The answer to a job run in another thread, awaited on ``loop`` (:attr:`awaited`). The
    thread gives it once (:meth:`set_result`, :meth:`set_exception`, or :meth:`tell`); on the
    loop, ``then`` (if given) is called, and :attr:`awaited` settled unless whoever waited gave
    up."""

    __slots__ = ("awaited", "inbox", "then")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, then: Callable[[], None] | None = None
    ) -> None:
        inbox = _LAST[0] if _LAST else None
        if inbox is None or inbox.loop is not loop:  # (loops taking turns: each a new inbox)
            inbox = Inbox(loop)
            _LAST[:] = [inbox]
        self.inbox = inbox
        self.awaited: asyncio.Future[T] = loop.create_future()
        self.then = then
        """Called on the loop when the answer comes, even if nobody waits for it any more."""

    def set_running_or_notify_cancel(self) -> bool:
        """False if whoever waited gave up before the job started (it is then dropped)."""
        return not self.awaited.cancelled()

    def set_result(self, value: T) -> None:
        self.inbox.put(self, value, None)

    def set_exception(self, error: BaseException | None) -> None:
        self.inbox.put(self, None, error)

    def tell(self, value: Any, error: BaseException | Cancelled | None) -> None:
        """The job's ``value``, or its ``error`` (:data:`CANCELLED`: it never ran), handed to
        the loop (in the job's thread)."""
        self.inbox.put(self, value, error)


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
