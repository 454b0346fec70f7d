"""Errors the engine raises or records.

::

    FlowtideError
    ├── EngineError                  the engine was asked something it cannot do
    │   ├── UnknownFlowError         no flow with this id is known to the engine
    │   ├── LifecycleError           a transition a run's lifecycle does not allow
    │   └── SignalRefused            a signal that cannot apply (expired, moved on, ...)
    └── RunError                     why a run failed (recorded on its result)
        ├── NodeTimeoutError         a node's window ended and ``timeout`` is not routed
        ├── UndeclaredOutputError    a node returned an output it does not declare
        ├── UnroutedOutputError      an output was taken that the placement does not route
        ├── DrainedWithoutTerminal   every token ended and no terminal was reached
        ├── FailedTerminalError      a branch reached a ``failed`` terminal
        ├── RecursionDepthError      subflows nested deeper than ``flow.max_depth``
        ├── SubflowFailedError       a child run failed and the parent does not route ``error``
        └── PrePhaseError            a ``pre`` phase failed

Each error also gives its fields as JSON values through ``details()`` (a run's result keeps them
with the error).

``Cancelled`` is not an ``Exception``: :meth:`NodeContext.raise_if_cancelled` raises it so that a
node's ``except Exception`` cannot swallow its cancellation (as with asyncio's CancelledError).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from flowtide.errors import FlowtideError
from flowtide.model.durations import format_duration
from flowtide.store.base import StoreDown


class EngineError(FlowtideError):
    """The engine was asked something it cannot do."""


class StoreUnavailableError(EngineError):
    """A step could not be committed (the store kept failing), or what a step reads could not
    be read (the store is down). The run is left in the store as it was, for this engine or
    another to resume."""

    def __init__(self, run_id: str, attempts: int, cause: BaseException) -> None:
        self.run_id = run_id
        self.attempts = attempts
        self.cause = cause
        failed = "failed" if attempts == 1 else f"failed {attempts} times in a row"
        super().__init__(
            f"run {run_id!r}: the store {failed} ({type(cause).__name__}: {cause}); the run is "
            "left in the store as it was"
        )

    def details(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "attempts": self.attempts,
            "cause": f"{type(self.cause).__name__}: {self.cause}",
        }


def unavailable(run_id: str, error: BaseException) -> StoreUnavailableError | None:
    """What ``error``, raised while run ``run_id`` was driven, says of the store: that it cannot
    be reached now (a step's commit that kept failing, or a read of a store that is down), or
    None (it is not the store's unavailability). A run is never failed for it: it is let go,
    as it is in the store, to be resumed."""
    if isinstance(error, StoreUnavailableError):
        return error
    if isinstance(error, StoreDown):
        return StoreUnavailableError(run_id, 1, error)
    return None


class UnknownFlowError(EngineError, LookupError):
    """No flow with this id is known to the engine (``flow_id``)."""

    def __init__(self, flow_id: str, *, looked_in_store: bool = False) -> None:
        self.flow_id = flow_id
        if looked_in_store:
            super().__init__(
                f"no flow {flow_id!r} is registered with the engine (engine.register_flow) or "
                "stored (flowtide flows register FILE, or Client.register)"
            )
            return
        super().__init__(
            f"no flow {flow_id!r} is known to the engine (pass it in the engine's catalog "
            "or register it with engine.register_flow)"
        )

    def details(self) -> dict[str, Any]:
        return {"flow_id": self.flow_id}


class LifecycleError(EngineError):
    """A run lifecycle transition that is not allowed (terminal states accept none)."""

    def __init__(self, current: str, wanted: str) -> None:
        self.current = current
        self.wanted = wanted
        super().__init__(f"a run cannot go from {current!r} to {wanted!r}")

    def details(self) -> dict[str, Any]:
        return {"current": self.current, "wanted": self.wanted}


class RefusalReason(StrEnum):
    """Why a signal was refused (:class:`SignalRefused`)."""

    EXPIRED = "expired"
    """The park's deadline has passed (``at``: the deadline)."""
    MOVED_ON = "moved_on"
    """A signal or an interrupting timer already moved the token on (``at``: when)."""
    CANCELLED = "cancelled"
    """The token was cancelled: run cancelled or ended, a join cancelled its branch."""
    UNKNOWN = "unknown"
    """No such run, no token ever parked there, or no park has this key."""
    NOT_PARKED = "not_parked"
    """A token is at the placement but it is running or waiting on a timer, not parked."""
    AMBIGUOUS = "ambiguous"
    """Several parked tokens match; address one by ``token_id``."""
    INVALID_OUTPUT = "invalid_output"
    """The output is not one the node declares and the placement routes."""


def format_instant(at: datetime, ref: datetime | None = None) -> str:
    """``10:10:00Z`` (``10:10:00.250Z`` with a fraction), with the date when not ``ref``'s."""
    at = at.astimezone(ref.tzinfo) if ref is not None and ref.tzinfo else at
    text = at.strftime("%H:%M:%S")
    if at.microsecond:
        text += f".{at.microsecond // 1000:03d}"
    text += "Z"
    if ref is None or ref.date() != at.date():
        text = f"{at.date().isoformat()}T{text}"
    return text


def format_gap(delta: timedelta) -> str:
    """A short human duration: ``3 s``, ``2 min 30 s``, ``1 h 5 min``, ``250 ms``."""
    seconds = abs(delta.total_seconds())
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:g} s" if seconds != int(seconds) else f"{int(seconds)} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s" if sec else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class SignalRefused(EngineError):
    """A signal that cannot apply; nothing was changed.

    ``reason`` (a :class:`RefusalReason`), ``at`` (when the park expired, moved on or was
    cancelled; None when not known), and where: ``run_id``, ``placement``, ``token_id``, ``key``.
    """

    def __init__(
        self,
        reason: RefusalReason,
        message: str,
        *,
        at: datetime | None = None,
        run_id: str | None = None,
        placement: str | None = None,
        token_id: str | None = None,
        key: str | None = None,
    ) -> None:
        self.reason = reason
        self.at = at
        self.run_id = run_id
        self.placement = placement
        self.token_id = token_id
        self.key = key
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        return {
            "reason": self.reason.value,
            "at": self.at.isoformat() if self.at else None,
            "run_id": self.run_id,
            "placement": self.placement,
            "token_id": self.token_id,
            "key": self.key,
        }


class RequestPending(EngineError):
    """A signal or cancel recorded in the store that no worker has answered yet (within the
    time the caller chose to wait). It is not lost: the worker that holds the run, or the next
    one to take it, applies it as it was recorded. ``request_id`` names it (``flowtide show``
    lists a run's pending requests), ``kind`` is ``signal`` or ``cancel``."""

    def __init__(self, run_id: str, request_id: str, kind: str, waited: float) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.kind = kind
        self.waited = waited
        super().__init__(
            f"the {kind} of run {run_id!r} is recorded (request {request_id}) but no worker "
            f"answered it within {waited:g} s; a worker applies it when it takes the run"
        )


class RunError(FlowtideError):
    """A reason a run failed; ``placement`` is where."""

    placement: str | None = None


class NodeTimeoutError(RunError, TimeoutError):
    """A node's window ended and its placement does not route ``timeout``: the run failed.
    Carries the ``node``, its ``placement`` and the ``budget`` (the timeout)."""

    def __init__(self, node: str, placement: str, budget: timedelta) -> None:
        self.node = node
        self.placement = placement
        self.budget = budget
        super().__init__(
            f"node {node!r} at placement {placement!r} exceeded its timeout of "
            f"{format_duration(budget)}"
        )

    def details(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "placement": self.placement,
            "budget": format_duration(self.budget),
        }


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

    def details(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "placement": self.placement,
            "output": self.output if isinstance(self.output, str) else repr(self.output),
            "declared": list(self.declared),
        }


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

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement, "output": self.output, "routed": list(self.routed)}


class DrainedWithoutTerminal(RunError):
    def __init__(self, last: Sequence[str]) -> None:
        self.last = tuple(last)
        where = ", ".join(self.last) if self.last else "nowhere"
        super().__init__(
            f"the run stopped without reaching any terminal (its last tokens ended at {where})"
        )

    def details(self) -> dict[str, Any]:
        return {"last": list(self.last)}


class FailedTerminalError(RunError):
    def __init__(self, placement: str) -> None:
        self.placement = placement
        super().__init__(f"the run reached the failed terminal {placement!r}")

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement}


class RecursionDepthError(RunError):
    def __init__(self, placement: str, flow_id: str, limit: int) -> None:
        self.placement = placement
        self.flow_id = flow_id
        self.limit = limit
        super().__init__(
            f"subflow {flow_id!r} at placement {placement!r} would nest deeper than the "
            f"limit of {limit} levels (flow.max_depth)"
        )

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement, "flow_id": self.flow_id, "limit": self.limit}


class SubflowFailedError(RunError):
    def __init__(self, placement: str, child_run_id: str, lifecycle: str, message: str) -> None:
        self.placement = placement
        self.child_run_id = child_run_id
        self.lifecycle = lifecycle
        super().__init__(
            f"subflow at placement {placement!r} ended {lifecycle} (child run "
            f"{child_run_id!r}): {message}"
        )

    def details(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "child_run_id": self.child_run_id,
            "lifecycle": self.lifecycle,
        }


class PrePhaseError(RunError):
    def __init__(self, placement: str, message: str) -> None:
        self.placement = placement
        super().__init__(f"pre phase {placement!r} failed: {message}")

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement}


class Cancelled(BaseException):
    """Raised in a node by ``ctx.raise_if_cancelled()`` once its scope is cancelled."""
