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
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from types import TracebackType
from typing import Any


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
