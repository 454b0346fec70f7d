"""Eager start: run a coroutine's first step at once, in the current task.

Python 3.12's eager tasks run a new task's first step synchronously and create nothing on the
loop when the coroutine finishes without suspending. Flowtide runs on 3.11 too, so this module
emulates them for the engine's branches: :func:`start` steps the coroutine once (in a copy of the
current context, as a new task would run it); if it finished, that is all; if it suspended, a
task takes over the remainder and first waits on what the coroutine is waiting on.

A branch whose node completes without suspending therefore costs no task, no loop iteration and
no scheduling. What the caller must do when :func:`start` returns a task: whatever it bound to
the current task during the first step (a cancel scope) must be bound to the returned task, which
runs the coroutine from then on; nothing else runs in between.

The task's coroutine is a small object (not a native coroutine) so that a cancel of the task
before its first step still reaches the suspended coroutine: a native coroutine that has not
started would take the ``CancelledError`` at its own first line.

A :class:`Carrier` drives a coroutine as an asyncio Task does, without being one: for a branch
whose node runs in a worker thread (it always suspends, on the pool's future), where a task's
creation, registration and scheduling cost more than the branch's own step. It steps the
coroutine in its own copy of the context, is the current task while it does (so cancel scopes
bind to it), waits on the futures the coroutine waits on, and has a task's cancel semantics
(``cancel``, ``cancelling``, ``uncancel``); as a future it gives the coroutine's result.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from asyncio import tasks as _tasks
from collections.abc import Callable, Coroutine, Generator
from types import TracebackType
from typing import Any

from flowtide.engine.threads import PoolFuture


def start(
    coro: Coroutine[Any, Any, Any],
    loop: asyncio.AbstractEventLoop,
    task: asyncio.Task[Any] | None = None,
) -> asyncio.Task[Any] | None:
    """Run ``coro`` until it finishes or first suspends, in the current task (``task``, when
    the caller knows it: :data:`home` is that task during the step).

    Returns None when it finished (its result is dropped; an exception it raised propagates to
    the caller), else the task that runs the rest of it.
    """
    global handoffs, home
    context = contextvars.copy_context()
    outer = home
    home = task
    try:
        pending = context.run(coro.send, None)
    except StopIteration:
        return None
    finally:
        home = outer
    handoffs += 1
    return loop.create_task(Remainder(coro, pending), context=context)


home: asyncio.Task[Any] | None = None
"""The current task while :func:`start` runs a first step it was told the task of (else None):
saves that step asking asyncio for it."""

handoffs = 0
"""How many coroutines :func:`start` has handed to a task so far: code that keeps the current
task in a variable across awaits can tell cheaply whether it may run in another task now."""


class Remainder(Coroutine[Any, Any, Any]):
    """The remainder of a coroutine that suspended during its eager first step, as a task's
    coroutine (or awaited by one): the first step hands back what the coroutine waits on (a
    future, or None for a bare yield), so that the task waits on it; after that every send and
    throw goes straight to the coroutine."""

    __slots__ = ("_coro", "_pending", "_primed")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending
        self._primed = True

    def send(self, value: Any) -> Any:
        if self._primed:
            self._primed = False
            pending, self._pending = self._pending, None
            return pending
        return self._coro.send(value)

    def throw(
        self,
        typ: type[BaseException] | BaseException,
        val: BaseException | object = None,
        tb: TracebackType | None = None,
    ) -> Any:
        # Also before the task's first step (a cancel right after the hand-over): the
        # coroutine is suspended where it awaits, so it observes the exception there.
        if self._primed:
            self._primed = False
            pending, self._pending = self._pending, None
            if isinstance(pending, asyncio.Future) and _is_cancel(typ):
                pending.cancel()  # as a task's cancel cancels the future it waits on
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # type: ignore[arg-type]

    def close(self) -> None:
        self._coro.close()

    def __next__(self) -> Any:
        return self.send(None)

    def __iter__(self) -> Remainder:
        return self

    def __await__(self) -> Generator[Any, None, Any]:
        return self


def _is_cancel(exc: type[BaseException] | BaseException) -> bool:
    kind = exc if isinstance(exc, type) else type(exc)
    return issubclass(kind, asyncio.CancelledError)


# What Task.__step uses to be the current task while it steps (a carrier is not a Task).
_enter_task: Callable[[asyncio.AbstractEventLoop, Any], None] = _tasks._enter_task
_leave_task: Callable[[asyncio.AbstractEventLoop, Any], None] = _tasks._leave_task

_current_tasks = getattr(_tasks, "_current_tasks", None)
current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = (
    _current_tasks.get if isinstance(_current_tasks, dict) else asyncio.current_task
)
"""``asyncio.current_task(loop)``, without a Python call where asyncio keeps them in a dict."""

_RESETS_MUST_CANCEL = sys.version_info >= (3, 13)
"""Task.uncancel() down to zero withdraws a cancel not yet delivered (Python 3.13+)."""


class Carrier(asyncio.Future[Any]):
    """Drives a coroutine as an asyncio Task would (see the module docstring): what
    ``Task.__step`` and ``Task.__wakeup`` do, with the same cancel semantics.

    Made by :meth:`of`; :meth:`start` runs the first step (in the carrier's context, on the
    loop: the caller schedules it where the task's first step would have run). Waiting on a
    :class:`~flowtide.engine.threads.PoolFuture` as its first waiter, it is resumed by the pool
    directly; on any other future, through a done callback as a task is. Not registered with
    asyncio: ``asyncio.all_tasks()`` does not list it, so whoever makes one keeps it where a
    shutdown finds it (the engine's executors cancel theirs when the engine closes). Awaiting a
    cancelled carrier raises a ``CancelledError`` with its coroutine's message, not the same
    exception object as a task would.
    """

    __slots__ = ("_cancel_msg", "_cancels", "_context", "_coro", "_must_cancel", "_waiter")

    _coro: Coroutine[Any, Any, Any]
    _context: contextvars.Context
    _waiter: asyncio.Future[Any] | None
    _must_cancel: bool
    _cancel_msg: Any
    _cancels: int

    @classmethod
    def of(cls, coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> Carrier:
        """A carrier of ``coro`` in a copy of the current context (as ``create_task``)."""
        carrier = cls(loop=loop)
        carrier._coro = coro
        carrier._context = contextvars.copy_context()
        carrier._waiter = None
        carrier._must_cancel = False
        carrier._cancel_msg = None
        carrier._cancels = 0
        return carrier

    def get_coro(self) -> Coroutine[Any, Any, Any]:
        return self._coro

    def get_context(self) -> contextvars.Context:
        return self._context

    # -- a task's cancel ------------

    def cancel(self, msg: Any | None = None) -> bool:
        """As ``Task.cancel``: cancel what the coroutine waits on, else throw ``CancelledError``
        into it at its next step."""
        self._log_traceback = False
        if self.done():
            return False
        self._cancels += 1
        waiter = self._waiter
        if waiter is not None and waiter.cancel(msg=msg):
            return True
        self._must_cancel = True
        self._cancel_msg = msg
        return True

    def cancelling(self) -> int:
        return self._cancels

    def uncancel(self) -> int:
        if self._cancels > 0:
            self._cancels -= 1
            if _RESETS_MUST_CANCEL and self._cancels == 0:
                self._must_cancel = False
        return self._cancels

    # -- stepping ------------

    def start(self) -> None:
        """Run the first step now, in the carrier's context (on the loop, outside any task)."""
        self._context.run(self.step)

    def step(self, exc: BaseException | None = None) -> None:
        """One step of the coroutine, as ``Task.__step`` (called in the carrier's context)."""
        if self.done():
            raise asyncio.InvalidStateError(f"step(): already done: {self!r}, {exc!r}")
        if self._must_cancel:
            if not isinstance(exc, asyncio.CancelledError):
                exc = (
                    asyncio.CancelledError()
                    if self._cancel_msg is None
                    else asyncio.CancelledError(self._cancel_msg)
                )
            self._must_cancel = False
        self._waiter = None
        loop = self._loop
        _enter_task(loop, self)
        try:
            result = self._coro.send(None) if exc is None else self._coro.throw(exc)
        except StopIteration as stop:
            if self._must_cancel:
                # Cancelled right as the coroutine returned.
                self._must_cancel = False
                super().cancel(msg=self._cancel_msg)
            else:
                super().set_result(stop.value)
        except asyncio.CancelledError as cancelled:
            # Awaiting a cancelled task raises its coroutine's CancelledError again: the same
            # message here (not the same exception object).
            super().cancel(msg=cancelled.args[0] if cancelled.args else None)
        except (KeyboardInterrupt, SystemExit) as failure:
            super().set_exception(failure)
            raise
        except BaseException as failure:
            super().set_exception(failure)
        else:
            # What the coroutine yielded: a future to wait on, or None (a bare yield: one
            # loop turn); anything else is an error thrown into it at its next step.
            if getattr(result, "_asyncio_future_blocking", None):
                if result is self:
                    failed = RuntimeError(f"a carrier cannot await on itself: {self!r}")
                elif result.get_loop() is not loop:
                    failed = RuntimeError(f"{self!r} got {result!r} of a different loop")
                else:
                    result._asyncio_future_blocking = False
                    if (
                        type(result) is PoolFuture
                        and result._carrier is None
                        and result._direct is None
                    ):
                        # The first waiter: the pool resumes this carrier itself when it
                        # resolves the future (see PoolFuture._resolve).
                        result._carrier = self
                    else:
                        result.add_done_callback(self._wakeup, context=self._context)
                    self._waiter = result
                    if self._must_cancel and result.cancel(msg=self._cancel_msg):
                        self._must_cancel = False
                    return
            elif result is None:
                loop.call_soon(self.step, context=self._context)
                return
            else:
                failed = RuntimeError(f"{self!r} got a bad yield: {result!r}")
            loop.call_soon(self.step, failed, context=self._context)
        finally:
            _leave_task(loop, self)

    def _wakeup(self, future: asyncio.Future[Any]) -> None:
        try:
            future.result()
        except BaseException as exc:
            self.step(exc)
        else:
            self.step()
