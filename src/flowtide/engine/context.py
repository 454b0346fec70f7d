"""The contexts user code is called with: a node's ``fn(ctx)``, a scatter source function's
``fn(ctx)``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flowtide.clock import Clock
from flowtide.engine.errors import Cancelled
from flowtide.engine.timing.scope import CancelScope


class NodeContext:
    """What a node sees.

    ``state`` is the node's own copy of the run state, made as the node reads it (a
    :class:`~flowtide.engine.state.nodestate.NodeState`): mutate it freely; when the node returns,
    the engine commits the top-level keys it changed (merged by the flow's reducers). A node that
    is cancelled (timeout, run deadline, abort, a lost ``first`` join) has its changes discarded.
    """

    __slots__ = (
        "_scope",
        "attempt",
        "clock",
        "item",
        "placement",
        "run_id",
        "signal",
        "state",
        "visit",
    )

    # Positional too: the engine makes one per attempt (keywords cost more).
    def __init__(
        self,
        state: dict[str, Any],
        run_id: str,
        placement: str,
        attempt: int,
        visit: int,
        item: Any,
        clock: Clock,
        scope: CancelScope,
        signal: Any = None,
    ) -> None:
        self.state = state
        self.run_id = run_id
        self.placement = placement
        self.attempt = attempt
        self.visit = visit
        self.item = item
        self.clock = clock
        self._scope = scope
        self.signal = signal
        """The payload of the signal that woke this node (it had parked), else None."""

    @property
    def idempotency_key(self) -> str:
        """Stable for this run, placement, visit and attempt (also across re-runs after a crash)."""
        return f"{self.run_id}:{self.placement}:{self.visit}:{self.attempt}"

    @property
    def cancelled(self) -> bool:
        """True once this node's scope is cancelled (safe to read from any thread)."""
        return self._scope.cancellation is not None

    @property
    def cancel_reason(self) -> str | None:
        c = self._scope.cancellation
        return c.reason.value if c is not None else None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~flowtide.engine.errors.Cancelled` (not an ``Exception``) if cancelled."""
        if self._scope.cancellation is not None:
            raise Cancelled(self._scope.cancellation.reason.value)

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block a worker thread until cancelled (or ``timeout`` seconds); True if cancelled."""
        return self._scope.flag.wait(timeout)

    def now(self) -> datetime:
        return self.clock.now()

    def __repr__(self) -> str:
        return f"<NodeContext run={self.run_id} placement={self.placement} attempt={self.attempt}>"


class SourceContext:
    """What a scatter's source function sees (``fn(ctx)``; see :mod:`flowtide.engine.run.scatter`).

    ``state`` is a read-only view of a copy of the run state as the scatter starts (a resumed
    scatter calls the function again, with the state as it is then): nothing the function does
    to it reaches the run. ``clock`` is the engine's clock: an async source that waits for its
    next item waits on it (``await ctx.clock.sleep(...)``), so virtual time in tests drives it.
    """

    __slots__ = ("clock", "placement", "run_id", "state", "visit")

    def __init__(
        self, state: Mapping[str, Any], run_id: str, placement: str, visit: int, clock: Clock
    ) -> None:
        self.state = state
        self.run_id = run_id
        self.placement = placement
        self.visit = visit
        self.clock = clock

    def now(self) -> datetime:
        return self.clock.now()

    def __repr__(self) -> str:
        return f"<SourceContext run={self.run_id} placement={self.placement} visit={self.visit}>"
