"""What a finished run reports: :class:`RunResult`."""

from __future__ import annotations

import math
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.errors import RunError
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.redaction import (
    Redact,
    bound_message,
    bound_traceback,
    clean_details,
    redacted,
)
from flowtide.model.durations import format_duration


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """One error of a run: the exception type name, its message, where it happened, its own
    fields (``details``: JSON values, from the exception's ``details()``) and the traceback of
    the code that raised it (None for the engine's own verdicts, such as a timeout)."""

    type: str
    message: str
    placement: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    traceback: str | None = None

    @classmethod
    def of(
        cls, exc: BaseException, placement: str | None = None, *, redact: Redact | None = None
    ) -> ErrorInfo:
        """``exc`` as a run records it: its message, traceback and details through ``redact``
        (else the process's registered hook), then cut to size (see
        :mod:`flowtide.engine.redaction`)."""
        trace = _traceback(exc)
        return cls(
            type(exc).__name__,
            bound_message(redacted(str(exc), redact)),
            placement or getattr(exc, "placement", None),
            clean_details(_details(exc), redact),
            bound_traceback(redacted(trace, redact)) if trace is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "placement": self.placement,
            "details": self.details,
            "traceback": self.traceback,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErrorInfo:
        """The inverse of :meth:`to_dict`."""
        return cls(
            data["type"],
            data["message"],
            data.get("placement"),
            dict(data.get("details") or {}),
            data.get("traceback"),
        )


def _details(exc: BaseException) -> dict[str, Any]:
    """The exception's fields, from its ``details()`` method (the engine's errors have one, a
    node's own exception may): only a mapping counts, made of JSON values."""
    method = getattr(exc, "details", None)
    if not callable(method):
        return {}
    try:
        fields = method()
        if not isinstance(fields, Mapping):
            return {}
        return {str(k): _json_value(v) for k, v in fields.items()}
    except Exception:
        return {}  # a broken details() must not hide the error being recorded


def _json_value(value: Any) -> Any:
    """``value`` as JSON values: containers as lists and string-keyed objects, instants and
    durations as ISO 8601 text, anything else (a NaN or an infinity too) as its repr."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(v) for v in value]
    if isinstance(value, datetime):
        return isoformat(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    return repr(value)


def _traceback(exc: BaseException) -> str | None:
    """The traceback as Python prints it, for an exception raised by code; None for the
    engine's verdicts on a run (a ``RunError``: a timeout, an undeclared output...), which
    their details describe."""
    if exc.__traceback__ is None or isinstance(exc, RunError):
        return None
    return "".join(traceback.format_exception(exc))


@dataclass(frozen=True, slots=True)
class InterruptedAt:
    """Where and why a run was interrupted: ``reason`` is ``timeout`` or ``abort``.

    ``node`` is the placement that was running (the first of them, in start order, when several
    were: all are in ``nodes``); ``None`` when nothing was running. ``sender``: who cancelled
    the run, when the cancel said (an API token's name, say).
    """

    reason: str
    node: str | None
    at: datetime
    nodes: tuple[str, ...] = ()
    sender: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "reason": self.reason,
            "node": self.node,
            "at": isoformat(self.at),
            "nodes": list(self.nodes),
        }
        if self.sender is not None:
            out["sender"] = self.sender
        return out


@dataclass(frozen=True, slots=True)
class ParkedToken:
    """A token waiting on the outside world: where, its correlation key, deadline and payload;
    ``run_id``: the child run (a subflow's) it waits in, None when it is this run's own."""

    token_id: str
    placement: str
    key: str | None
    deadline: datetime | None
    payload: Any = None
    since: datetime | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "token_id": self.token_id,
            "placement": self.placement,
            "key": self.key,
            "deadline": isoformat(self.deadline) if self.deadline else None,
            "payload": self.payload,
            "since": isoformat(self.since) if self.since else None,
        }
        if self.run_id is not None:
            out["run_id"] = self.run_id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParkedToken:
        return cls(
            data["token_id"],
            data["placement"],
            data.get("key"),
            _instant(data.get("deadline")),
            data.get("payload"),
            _instant(data.get("since")),
            data.get("run_id"),
        )


def _instant(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RunResult:
    """Where a run stands once it has ended or parked: its lifecycle, the outcome of the terminal
    that ended it, its final state, its errors, why it was interrupted (a timeout or an abort,
    None on a clean end) and the tokens still waiting on the outside world."""

    run_id: str
    lifecycle: Lifecycle
    outcome: str | None
    """The outcome of the terminal that ended the run (None when none was reached)."""
    state: dict[str, Any]
    errors: tuple[ErrorInfo, ...] = ()
    interrupted_at: InterruptedAt | None = None
    parked: tuple[ParkedToken, ...] = ()
    """The tokens waiting on the outside world (lifecycle ``parked``; empty once ended)."""
    warnings: tuple[str, ...] = ()
    terminals: tuple[str, ...] = ()
    """The terminal placements reached, in order."""

    @property
    def ok(self) -> bool:
        return self.lifecycle is Lifecycle.COMPLETED

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "lifecycle": self.lifecycle.value,
            "outcome": self.outcome,
            "state": self.state,
            "errors": [e.to_dict() for e in self.errors],
            "interrupted_at": self.interrupted_at.to_dict() if self.interrupted_at else None,
            "parked": [p.to_dict() for p in self.parked],
            "warnings": list(self.warnings),
            "terminals": list(self.terminals),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """The inverse of :meth:`to_dict` (a result stored with its run)."""
        interrupted = data.get("interrupted_at")
        return cls(
            run_id=data["run_id"],
            lifecycle=Lifecycle(data["lifecycle"]),
            outcome=data.get("outcome"),
            state=dict(data.get("state") or {}),
            errors=tuple(ErrorInfo.from_dict(e) for e in data.get("errors", ())),
            interrupted_at=InterruptedAt(
                interrupted["reason"],
                interrupted.get("node"),
                datetime.fromisoformat(interrupted["at"]),
                tuple(interrupted.get("nodes", ())),
                interrupted.get("sender"),
            )
            if interrupted
            else None,
            parked=tuple(ParkedToken.from_dict(p) for p in data.get("parked", ())),
            warnings=tuple(data.get("warnings", ())),
            terminals=tuple(data.get("terminals", ())),
        )


def run_result(
    run_id: str,
    lifecycle: Lifecycle,
    outcome: str | None,
    state: dict[str, Any],
    errors: tuple[ErrorInfo, ...] = (),
    interrupted_at: InterruptedAt | None = None,
    parked: tuple[ParkedToken, ...] = (),
    warnings: tuple[str, ...] = (),
    terminals: tuple[str, ...] = (),
) -> RunResult:
    """``RunResult(...)`` with the same arguments, passed by position (a run's park and its end
    each make one)."""
    return RunResult(
        run_id, lifecycle, outcome, state, errors, interrupted_at, parked, warnings, terminals
    )
