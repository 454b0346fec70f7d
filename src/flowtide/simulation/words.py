"""Each event of a run, and each signal a script sent, told in plain words with its times since
the run started: ``collect-payment parked (key pay-1), window ends +10:00 (anchored at the
node's first arrival, +0:00)``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from flowtide.demo.timing import since
from flowtide.engine import (
    EventPayload,
    HookFailed,
    JoinArrived,
    JoinFired,
    NodeFailed,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    NodeTimedOut,
    Parked,
    ProcessStarted,
    RunFinished,
    RunStarted,
    RunWarning,
    ScatterItemFinished,
    Signalled,
    SubflowFinished,
    SubflowStarted,
    TerminalReached,
    TimerFired,
    TokenCancelled,
    WaitStarted,
    payload_of,
)
from flowtide.model.durations import format_duration
from flowtide.model.settings import TimeoutAnchor
from flowtide.simulation.timeline import Moment, SignalSent
from flowtide.store import EventRecord

__all__ = ["Narrator", "Timeouts", "anchor_words", "compact_json"]

Timeouts = Callable[[str, str], timedelta | None]
"""(run id, placement) -> the timeout in force at that placement of the run's flow."""

Anchors = Callable[[str, str], TimeoutAnchor]
"""(run id, placement) -> the anchor of that placement's window."""


def compact_json(value: Any) -> str:
    """A payload as the timeline shows it: JSON, keys sorted, on one line."""
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def anchor_words(anchor: TimeoutAnchor, at: str, *, parked: bool) -> str:
    """``anchored at the node's first arrival, +0:00``."""
    if anchor is TimeoutAnchor.NODE:
        return f"anchored at the node's first arrival, {at}"
    if anchor is TimeoutAnchor.INSTANCE:
        return f"anchored at the run's start, {at}"
    return f"anchored at this park, {at}" if parked else f"anchored at this attempt's start, {at}"


def _to(targets: Sequence[str] | None) -> str:
    return f" → {', '.join(targets)}" if targets else ""


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("ch") else "s")


class Narrator:
    """Tells a run's events, and the script's signals, in order (it remembers what it was told:
    a node woken by a signal "runs again", a signal refused at a cancelled token says why it was
    cancelled)."""

    def __init__(
        self, start: datetime, timeouts: Timeouts, anchors: Anchors, paths: dict[str, str]
    ) -> None:
        self.start = start
        self._timeouts = timeouts
        self._anchors = anchors
        self._paths = paths
        """Child run id -> its path (``review``, ``items[2]``); the simulated run has none."""
        self._woken: set[str] = set()
        """Tokens a signal woke, whose node runs again."""
        self._cancelled: dict[str, str] = {}
        """Token id -> why it was cancelled, in words."""

    def t(self, at: datetime | str | None) -> str:
        """An instant as the time since the run started (``+9:30``)."""
        if at is None:
            return "?"
        when = datetime.fromisoformat(at) if isinstance(at, str) else at
        return since(when - self.start)

    # -- events ------------

    def event(self, record: EventRecord) -> Moment:
        try:
            payload = payload_of(record)
        except ValueError:
            text = f"{record.kind} {compact_json(record.data)}"
        else:
            text = self._node_text(record, payload) or self._flow_text(record, payload)
        return Moment(
            at=record.at,
            after=record.at - self.start,
            kind=record.kind,
            text=text,
            placement=record.placement,
            run=self._paths.get(record.run_id),
            attempt=record.attempt,
            data=dict(record.data),
        )

    def _window(self, record: EventRecord, deadline: str | None, *, parked: bool) -> str:
        """``, window ends +10:00 (anchored at ..., +0:00)`` (empty without a window)."""
        if deadline is None or record.placement is None:
            return ""
        ends = datetime.fromisoformat(deadline)
        timeout = self._timeouts(record.run_id, record.placement)
        if timeout is None:
            return f", window ends {self.t(ends)}"
        anchor = self._anchors(record.run_id, record.placement)
        words = anchor_words(anchor, self.t(ends - timeout), parked=parked)
        return f", window ends {self.t(ends)} ({words})"

    def _node_text(self, record: EventRecord, payload: EventPayload) -> str | None:
        p = record.placement or "?"
        token = record.token_id or ""
        match payload:
            case NodeStarted():
                return self._started(record, payload)
            case Parked():
                key = f" (key {payload.key})" if payload.key else ""
                window = self._window(record, payload.deadline, parked=True)
                return f"{p} parked{key}" + (window or ", with no window")
            case Signalled():
                if payload.output is not None:
                    return f"{p} took the signal: output {payload.output!r}{_to(payload.to)}"
                self._woken.add(token)
                sets = f" (it sets {', '.join(payload.keys)})" if payload.keys else ""
                return f"{p} took the signal{sets}"
            case NodeFinished(items=None):
                return f"{p} returned {payload.output!r}{_to(payload.to)}"
            case NodeFinished():
                done = f"{payload.succeeded} of {_plural(payload.items or 0, 'item')} succeeded"
                return f"scatter {p} ended {payload.output!r}: {done}{_to(payload.to)}"
            case NodeFailed():
                error = payload.error
                return f"{p} failed: {error['type']}: {error['message']}{_to(payload.to)}"
            case NodeTimedOut():
                ended = f" at {self.t(payload.deadline)}" if payload.deadline else ""
                what = f"{p} timed out: its window of {_duration_in_seconds(payload.budget)} ended"
                if not payload.routed:
                    return f"{what}{ended}, and it routes no 'timeout'"
                return f"{what}{ended}{_to(payload.to)}"
            case NodeRetried():
                return (
                    f"{p} will try again: attempt {payload.next_attempt} at "
                    f"{self.t(payload.due)} (after {payload.error})"
                )
            case ProcessStarted():
                return f"{p} runs in process {payload.pid}"
            case TokenCancelled():
                why = (
                    f"join {payload.join} fired without it"
                    if payload.reason == "join_loser"
                    else "the run ended"
                    if payload.reason == "run_ended"
                    else payload.reason
                )
                self._cancelled[token] = f"{why} at {self.t(record.at)}"
                return f"{p} cancelled: {why}"
        return None

    def _started(self, record: EventRecord, payload: NodeStarted) -> str:
        p = record.placement or "?"
        token = record.token_id or ""
        window = self._window(record, payload.deadline, parked=False)
        if payload.kind == "phase":
            return f"{payload.phase} phase {p} started{window}"
        if payload.kind == "scatter":
            return f"scatter {p} started{window}"
        if payload.kind == "subflow":
            return f"subflow {p} started (flow {payload.subflow}){window}"
        if token in self._woken:
            self._woken.discard(token)
            return f"{p} runs again with the signal{window}"
        notes = []
        if payload.visit > 1:
            notes.append(f"visit {payload.visit}")
        if (record.attempt or 1) > 1:
            notes.append(f"attempt {record.attempt}")
        shown = f" ({', '.join(notes)})" if notes else ""
        return f"{p} started{shown}{window}"

    def _flow_text(self, record: EventRecord, payload: EventPayload) -> str:
        p = record.placement or "?"
        match payload:
            case RunStarted():
                deadline = f", its deadline {self.t(payload.deadline)}" if payload.deadline else ""
                return f"the run started{deadline}"
            case WaitStarted():
                return f"{p} waits until {self.t(payload.due)}"
            case TimerFired(purpose="wait"):
                return f"{p}: the wait is over{_to(payload.to)}"
            case TimerFired(purpose="retry"):
                return f"{p}: the backoff is over, the next attempt starts"
            case TimerFired():
                how = "interrupting" if payload.interrupting else "not interrupting"
                return (
                    f"{p}: timer {payload.index} fired ({how}), output "
                    f"{payload.output!r}{_to(payload.to)}"
                )
            case JoinArrived():
                return f"a branch arrived at join {p}"
            case JoinFired():
                came = _plural(payload.arrived, "branch")
                return f"join {p} fired {payload.output!r} ({came} arrived){_to(payload.to)}"
            case ScatterItemFinished():
                return f"{p}: item {payload.index} {payload.status}, output {payload.output!r}"
            case SubflowStarted():
                return f"{p} started its child run"
            case SubflowFinished():
                outcome = f", outcome {payload.outcome!r}" if payload.outcome else ""
                return f"{p}: its child run ended {payload.lifecycle}{outcome}{_to(payload.to)}"
            case TerminalReached():
                return f"terminal {p} reached (outcome {payload.outcome!r})"
            case RunFinished():
                return self._finished(payload)
            case RunWarning():
                return f"warning: {payload.message}"
            case HookFailed():
                return f"hook {payload.hook} failed on {payload.event}: {payload.error}"
        return f"{record.kind} {compact_json(record.data)}"

    def _finished(self, payload: RunFinished) -> str:
        outcome = f", outcome {payload.outcome!r}" if payload.outcome else ""
        errors = "".join(f"; {e['type']}: {e['message']}" for e in payload.errors[:1])
        more = len(payload.errors) - 1
        if more > 0:
            errors += f" (and {more} more)"
        return f"the run ended: {payload.lifecycle}{outcome}{errors}"

    # -- signals ------------

    def signal(self, sent: SignalSent) -> Moment:
        return Moment(
            at=sent.at,
            after=sent.at - self.start,
            kind="signal",
            text=self.signal_text(sent),
            placement=sent.placement or sent.reached,
            signal=sent,
        )

    def signal_text(self, sent: SignalSent) -> str:
        parts = []
        if sent.placement is not None:
            parts.append(f"to {sent.placement}")
        if sent.key is not None:
            parts.append(f"key {sent.key}")
        what = "signal " + ", ".join(parts)
        if sent.payload:
            what += f" {compact_json(sent.payload)}"
        if sent.output is not None:
            what += f", output {sent.output!r}"
        if sent.accepted:
            return f"{what}: accepted"
        return f"{what}: refused, {self._refusal(sent)}"

    def _refusal(self, sent: SignalSent) -> str:
        at = self.t(sent.closed_at) if sent.closed_at is not None else None
        match sent.reason:
            case "expired":
                return f"expired: the park's window ended at {at}" if at else "expired"
            case "moved_on":
                return f"moved on: the token left at {at}" if at else "moved on"
            case "cancelled":
                why = self._cancelled.get(sent.token_id or "")
                if why is not None:
                    return f"cancelled: {why}"
                return f"cancelled at {at}" if at else "cancelled"
            case "unknown":
                return "unknown: no park matches it"
            case "not_parked":
                return "not parked: the token there is running or waiting"
            case "ambiguous":
                return "ambiguous: several parked tokens match"
            case "invalid_output":
                return "invalid output: the node does not declare it, or the placement routes none"
        return f"{sent.reason}: {sent.message}"


def _duration_in_seconds(seconds: float) -> str:
    """A duration given in seconds, as ISO 8601 text (``PT10M``)."""
    return format_duration(timedelta(seconds=seconds))
