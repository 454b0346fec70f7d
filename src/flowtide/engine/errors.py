"""Errors the engine raises or records.

::

    FlowtideError
    ├── EngineError                  the engine was asked something it cannot do
    │   ├── UnknownFlowError         no flow with this id is known to the engine
    │   └── LifecycleError           a transition a run's lifecycle does not allow
    └── RunError                     why a run failed (recorded on its result)
        ├── NodeTimeoutError         a node's window ended and ``timeout`` is not routed
        ├── UndeclaredOutputError    a node returned an output it does not declare
        ├── UnroutedOutputError      an output was taken that the placement does not route
        ├── DrainedWithoutTerminal   every token ended and no terminal was reached
        ├── FailedTerminalError      a branch reached a ``failed`` terminal
        ├── RecursionDepthError      subflows nested deeper than ``flow.max_depth``
        ├── SubflowFailedError       a child run failed and the parent does not route ``error``
        └── PrePhaseError            a ``pre`` phase failed

``Cancelled`` is not an ``Exception``: :meth:`NodeContext.raise_if_cancelled` raises it so that a
node's ``except Exception`` cannot swallow its cancellation (as with asyncio's CancelledError).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from flowtide.errors import FlowtideError
from flowtide.model.durations import format_duration


class EngineError(FlowtideError):
    """The engine was asked something it cannot do."""


class UnknownFlowError(EngineError, LookupError):
    def __init__(self, flow_id: str) -> None:
        self.flow_id = flow_id
        super().__init__(
            f"no flow {flow_id!r} is known to the engine (pass it in the engine's catalog "
            "or register it with engine.register_flow)"
        )


class LifecycleError(EngineError):
    """A run lifecycle transition that is not allowed (terminal states accept none)."""

    def __init__(self, current: str, wanted: str) -> None:
        self.current = current
        self.wanted = wanted
        super().__init__(f"a run cannot go from {current!r} to {wanted!r}")


class RunError(FlowtideError):
    """A reason a run failed; ``placement`` is where."""

    placement: str | None = None


class NodeTimeoutError(RunError, TimeoutError):
    def __init__(self, node: str, placement: str, budget: timedelta) -> None:
        self.node = node
        self.placement = placement
        self.budget = budget
        super().__init__(
            f"node {node!r} at placement {placement!r} exceeded its timeout of "
            f"{format_duration(budget)}"
        )


class UndeclaredOutputError(RunError):
    def __init__(self, node: str, placement: str, output: object, declared: Sequence[str]) -> None:
        self.node = node
        self.placement = placement
        self.output = output
        self.declared = tuple(declared)
        super().__init__(
            f"node {node!r} at placement {placement!r} returned output {output!r}, which it "
            f"does not declare (declared: {', '.join(self.declared)})"
        )


class UnroutedOutputError(RunError):
    def __init__(self, placement: str, output: str, routed: Sequence[str]) -> None:
        self.placement = placement
        self.output = output
        self.routed = tuple(routed)
        shown = ", ".join(self.routed) if self.routed else "none"
        super().__init__(
            f"placement {placement!r} took output {output!r}, which has no route "
            f"(routed outputs: {shown})"
        )


class DrainedWithoutTerminal(RunError):
    def __init__(self, last: Sequence[str]) -> None:
        self.last = tuple(last)
        where = ", ".join(self.last) if self.last else "nowhere"
        super().__init__(
            f"the run stopped without reaching any terminal (its last tokens ended at {where})"
        )


class FailedTerminalError(RunError):
    def __init__(self, placement: str) -> None:
        self.placement = placement
        super().__init__(f"the run reached the failed terminal {placement!r}")


class RecursionDepthError(RunError):
    def __init__(self, placement: str, flow_id: str, limit: int) -> None:
        self.placement = placement
        self.flow_id = flow_id
        self.limit = limit
        super().__init__(
            f"subflow {flow_id!r} at placement {placement!r} would nest deeper than the "
            f"limit of {limit} levels (flow.max_depth)"
        )


class SubflowFailedError(RunError):
    def __init__(self, placement: str, child_run_id: str, lifecycle: str, message: str) -> None:
        self.placement = placement
        self.child_run_id = child_run_id
        self.lifecycle = lifecycle
        super().__init__(
            f"subflow at placement {placement!r} ended {lifecycle} (child run "
            f"{child_run_id!r}): {message}"
        )


class PrePhaseError(RunError):
    def __init__(self, placement: str, message: str) -> None:
        self.placement = placement
        super().__init__(f"pre phase {placement!r} failed: {message}")


class Cancelled(BaseException):
    """Raised in a node by ``ctx.raise_if_cancelled()`` once its scope is cancelled."""
