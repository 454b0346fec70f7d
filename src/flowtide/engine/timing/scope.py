"""Cancel scopes: a tree of cancellation, one child scope per node attempt.

A run has a root scope; each node attempt runs in a child of it (a subflow's child run in a child
of the subflow's attempt). Cancelling a scope cancels its subtree and nothing else: a node's
timeout cancels only that node's scope; siblings and the run go on. A scope records *why* it was
cancelled (:class:`CancelReason`), so nobody has to guess from the clock.

Binding a scope to the running task (``with scope.bind():``) makes its cancellation cancel that
task (asyncio ``CancelledError``, which ``except Exception`` does not catch); on leaving the
block, the scope swallows exactly the cancellation it caused (``Task.uncancel``) and reports it in
``cancelled_caught``. A cancellation from elsewhere (shutting the engine down) propagates.
Sync code in a worker thread polls :attr:`CancelScope.cancelled` (a thread-safe flag); extra
actions (killing a subprocess) are registered with :meth:`CancelScope.on_cancel`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowtide.clock import Clock, TimerHandle


class CancelReason(StrEnum):
    NODE_TIMEOUT = "node_timeout"
    RUN_DEADLINE = "run_deadline"
    ABORT = "abort"
    JOIN_LOSER = "join_loser"
    """Another branch won a ``first`` (or completed a ``quorum``) join."""
    TIMER = "timer"
    """An interrupting escalation timer moved the token on."""
    RUN_ENDED = "run_ended"
    """The run ended (another branch failed it) while this scope was live."""
    SHUTDOWN = "shutdown"


@dataclass(frozen=True, slots=True)
class Cancellation:
    reason: CancelReason
    at: datetime
    placement: str | None = None
    """The placement whose scope was cancelled first (the origin of a propagated cancel)."""
    message: str | None = None
    sender: str | None = None
    """Who asked for it (a cancel's sender), when they said."""


class CancelScope:
    __slots__ = (
        "_actions",
        "_cancelled_by_us",
        "_children",
        "_flag",
        "_parent",
        "_task",
        "cancellation",
        "cancelled_caught",
        "placement",
    )

    def __init__(self, parent: CancelScope | None = None, placement: str | None = None) -> None:
        self._parent = parent
        self._children: set[CancelScope] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._actions: list[Callable[[Cancellation], None]] | None = None
        self._flag: threading.Event | None = None
        self._cancelled_by_us = False
        self.placement = placement
        self.cancellation: Cancellation | None = None
        self.cancelled_caught = False
        if parent is not None:
            if parent._children is None:
                parent._children = set()
            parent._children.add(self)
            if parent.cancellation is not None:
                self.cancellation = parent.cancellation

    # -- state ------------

    @property
    def cancel_called(self) -> bool:
        return self.cancellation is not None

    @property
    def flag(self) -> threading.Event:
        """A thread-safe flag set when the scope is cancelled (for sync code in threads)."""
        if self._flag is None:
            self._flag = threading.Event()
            if self.cancellation is not None:
                self._flag.set()
        return self._flag

    def child(self, placement: str | None = None) -> CancelScope:
        return CancelScope(self, placement)

    def close(self) -> None:
        """Detach from the parent (the scope is done)."""
        if self._parent is not None and self._parent._children is not None:
            self._parent._children.discard(self)

    # -- cancelling ------------

    def cancel(
        self,
        reason: CancelReason,
        at: datetime,
        message: str | None = None,
        sender: str | None = None,
    ) -> bool:
        """Cancel this scope and its subtree; False if it was already cancelled."""
        if self.cancellation is not None:
            return False
        self._propagate(Cancellation(reason, at, self.placement, message, sender))
        return True

    def _propagate(self, cancellation: Cancellation) -> None:
        if self.cancellation is not None:
            return
        self.cancellation = cancellation
        if self._flag is not None:
            self._flag.set()
        task = self._task
        if task is not None and not task.done() and task is not _current_task():
            self._cancelled_by_us = True
            task.cancel(msg=f"flowtide: {cancellation.reason.value}")
        if self._actions:
            for action in self._actions:
                action(cancellation)
        if self._children:
            for child in list(self._children):
                child._propagate(cancellation)

    def on_cancel(self, action: Callable[[Cancellation], None]) -> None:
        """Call ``action`` when the scope is cancelled (at once if it already is)."""
        if self.cancellation is not None:
            action(self.cancellation)
            return
        if self._actions is None:
            self._actions = []
        self._actions.append(action)

    def bind(self) -> _Bound:
        """Run the block in this scope: a cancel cancels the current task; see the module doc.

        Check :attr:`cancel_called` first: a scope already cancelled should not run code at all.
        """
        return _Bound(self)

    def _release(self, task: asyncio.Task[Any]) -> bool:
        """Undo our own ``task.cancel()``; True if the task is left with no other cancel."""
        if not self._cancelled_by_us:
            return False
        self._cancelled_by_us = False
        return task.uncancel() == 0


class _Bound:
    """``with scope.bind():`` (a plain class: this is on every node attempt's path)."""

    __slots__ = ("_scope", "_task")

    def __init__(self, scope: CancelScope) -> None:
        self._scope = scope
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> CancelScope:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a cancel scope must be bound inside a task")
        self._task = task
        self._scope._task = task
        return self._scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        task = self._task
        assert task is not None
        scope._task = None
        released = scope._release(task)
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            if not released:
                return False
            scope.cancelled_caught = True
            return True
        # Cancelled, but the code swallowed it or finished first: still cancelled.
        scope.cancelled_caught = scope.cancellation is not None
        return False


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class ScopeDeadline:
    """A scope's own window: at ``deadline`` the clock cancels the scope (``node_timeout``).

    :attr:`fired` is true when that cancel was the scope's first, i.e. the attempt ended by its
    own timeout and not by a cancel from above that came earlier. :meth:`disarm` when the
    attempt is over, whatever its end.
    """

    __slots__ = ("_handle", "_scope", "fired")

    def __init__(self, clock: Clock, scope: CancelScope, deadline: datetime | None) -> None:
        self._scope = scope
        self.fired = False
        self._handle: TimerHandle | None = None
        if deadline is not None:
            at = deadline

            def fire() -> None:
                self.fired = scope.cancel(CancelReason.NODE_TIMEOUT, at)

            self._handle = clock.call_at(at, fire)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
