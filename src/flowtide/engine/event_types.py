"""The typed payload of each event kind: one frozen dataclass per :class:`EventKind`.

A payload is what an :class:`~flowtide.store.EventRecord` carries in its ``data``; each class's
docstring says when its kind is recorded and what each field means. Fields are JSON-friendly
(text, numbers, booleans, lists, small dicts): instants are ISO 8601 text and durations seconds.
Their stored form, and reading it back, are in :mod:`flowtide.engine.event_data`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypedDict

from flowtide.engine.events import EventKind
from flowtide.engine.redaction import Redact
from flowtide.engine.result import ErrorInfo

__all__ = [
    "PAYLOADS",
    "ErrorData",
    "EventPayload",
    "HookFailed",
    "JoinArrived",
    "JoinFired",
    "Moving",
    "NodeFailed",
    "NodeFinished",
    "NodeRetried",
    "NodeStarted",
    "NodeTimedOut",
    "Parked",
    "ProcessStarted",
    "RunFinished",
    "RunStarted",
    "RunWarning",
    "ScatterItemFinished",
    "Signalled",
    "SubflowFinished",
    "SubflowStarted",
    "TerminalReached",
    "TimerFired",
    "TokenCancelled",
    "WaitStarted",
    "error_data",
]


class ErrorData(TypedDict):
    """An exception as an event records it: as :class:`~flowtide.engine.ErrorInfo` has it,
    without the placement (the record has it)."""

    type: str
    """The exception's class name."""
    message: str
    """``str()`` of the exception."""
    details: dict[str, Any]
    """The exception's own fields as JSON values, from its ``details()`` method (empty
    without one; a record written before Flowtide kept them reads back with none)."""
    traceback: str | None
    """The traceback as Python prints it, for an exception raised by code; ``None`` for the
    engine's own verdicts (a timeout, an undeclared output...) and in older records."""


def error_data(exc: BaseException, redact: Redact | None = None) -> ErrorData:
    """``exc`` as an event records it (redacted and cut to size as :meth:`ErrorInfo.of`)."""
    info = ErrorInfo.of(exc, redact=redact)
    return {
        "type": info.type,
        "message": info.message,
        "details": info.details,
        "traceback": info.traceback,
    }


class EventPayload:
    """Base of the payload classes; ``KIND`` is the event kind each one records."""

    __slots__ = ()
    KIND: ClassVar[EventKind]
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # each is a dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(EventPayload):
    """The run's first event, committed with its first step.

    ``flow`` and ``version``: the flow the run follows; ``deadline``: the run's deadline, if any.
    """

    KIND: ClassVar[EventKind] = EventKind.RUN_STARTED
    flow: str
    version: str
    deadline: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStarted(EventPayload):
    """A placement attempt starts: a task, a scatter, a subflow, or a pre or post phase.

    ``visit``: how many times the run has reached this placement (1 the first time);
    ``kind``: ``task``, ``scatter``, ``subflow`` or ``phase``; ``deadline``: the attempt's
    deadline, if any (a scatter has none: its items have their own); ``node``: the node
    implementation that runs (a task, a phase, a scatter whose body is a node); ``phase``:
    ``pre`` or ``post`` for a phase; ``subflow``: the child flow of a subflow, or of a scatter
    whose body is a flow. The attempt number is the record's ``attempt``.
    """

    KIND: ClassVar[EventKind] = EventKind.NODE_STARTED
    visit: int
    kind: Literal["task", "scatter", "subflow", "phase"]
    deadline: str | None
    node: str | None = None
    phase: str | None = None
    subflow: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStarted(EventPayload):
    """A process-isolated node's subprocess runs; ``pid``: its process id."""

    KIND: ClassVar[EventKind] = EventKind.PROCESS_STARTED
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFinished(EventPayload):
    """An attempt returned an output (a task, a scatter, a phase).

    ``output``: the output taken; ``to``: the placements the token moved to (``None`` for a
    phase, which does not route, and for an output nothing routes: the run fails). A scatter
    adds its counts: ``items`` (with a result), ``succeeded``, ``failed``, and ``started`` (items
    started by this attempt; a resumed scatter does not start its finished items again).
    """

    KIND: ClassVar[EventKind] = EventKind.NODE_FINISHED
    output: str
    to: list[str] | None = None
    items: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    started: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFailed(EventPayload):
    """An attempt raised; ``error``: the exception. A ``node_retried`` follows if it retries.
    ``to``: where the token moved by the placement's ``error`` route, when the failure takes it
    (a subflow whose child could not start, its nesting too deep)."""

    KIND: ClassVar[EventKind] = EventKind.NODE_FAILED
    error: ErrorData
    to: list[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeTimedOut(EventPayload):
    """An attempt, or a park, ran past its deadline.

    ``budget``: the node's timeout in seconds; ``deadline``: the instant it passed (absent
    from a phase's record written before Flowtide recorded it); ``routed``: whether the
    placement routes ``timeout`` (else the run fails, unless a retry follows); ``to``: where the
    token moved by ``timeout``.
    """

    KIND: ClassVar[EventKind] = EventKind.NODE_TIMED_OUT
    budget: float
    routed: bool
    deadline: str | None = None
    to: list[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRetried(EventPayload):
    """A failed or timed-out attempt will run again (the record's ``attempt`` is the failed one).

    ``due``: the instant of the next attempt; ``next_attempt``: its number; ``delay``: the
    backoff in seconds; ``error``: the failure's class name. A ``timer_fired`` with purpose
    ``retry`` follows when the backoff is over.
    """

    KIND: ClassVar[EventKind] = EventKind.NODE_RETRIED
    due: str
    next_attempt: int
    delay: float
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitStarted(EventPayload):
    """A token waits at a wait placement until ``due``."""

    KIND: ClassVar[EventKind] = EventKind.WAIT_STARTED
    due: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TimerFired(EventPayload):
    """A due instant came: a wait elapsed, a retry backoff ended, or an escalation timer fired.

    ``purpose``: ``wait``, ``retry`` or ``timer``; ``output``: the output the token takes
    (``elapsed`` for a wait, the timer's output for a timer, none for a retry); ``to``: where
    the token (or, for a non-interrupting timer, each new token) moved. For a timer only:
    ``index`` (its position in the node's timers), ``anchor`` (what its instant counts from)
    and ``interrupting`` (true: the node stops and its token moves on; false: new tokens start
    on the output and the node keeps waiting).
    """

    KIND: ClassVar[EventKind] = EventKind.TIMER_FIRED
    purpose: Literal["wait", "retry", "timer"]
    output: str | None = None
    index: int | None = None
    anchor: str | None = None
    interrupting: bool | None = None
    to: list[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinArrived(EventPayload):
    """A branch of ``split`` (its index ``branch``) arrived at a join and waits for the others."""

    KIND: ClassVar[EventKind] = EventKind.JOIN_ARRIVED
    split: str
    branch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinFired(EventPayload):
    """A join fired.

    ``output``: ``success``, ``error`` or ``empty``; ``arrived``: how many branches arrived;
    ``branches``: the index of each, in arrival order (empty for a token from no split);
    ``to``: where the joined token moved.
    """

    KIND: ClassVar[EventKind] = EventKind.JOIN_FIRED
    output: str
    arrived: int
    branches: list[int]
    to: list[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScatterItemFinished(EventPayload):
    """One scatter item finished: ``index`` in the source, the ``output`` it took, and its
    ``status`` (``done``, or ``failed``: an error or timeout output)."""

    KIND: ClassVar[EventKind] = EventKind.SCATTER_ITEM_FINISHED
    index: int
    output: str
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubflowStarted(EventPayload):
    """A subflow placement started its child run, ``child`` (its run id)."""

    KIND: ClassVar[EventKind] = EventKind.SUBFLOW_STARTED
    child: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubflowFinished(EventPayload):
    """A subflow's child run ended.

    ``child``: its run id; ``lifecycle`` and ``outcome``: how it ended; ``output``: what the
    placement takes (``success`` or ``error``); ``to``: where the token moved.
    """

    KIND: ClassVar[EventKind] = EventKind.SUBFLOW_FINISHED
    child: str
    lifecycle: str
    outcome: str | None
    output: str
    to: list[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalReached(EventPayload):
    """A token reached a terminal; ``outcome``: the terminal's outcome."""

    KIND: ClassVar[EventKind] = EventKind.TERMINAL_REACHED
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCancelled(EventPayload):
    """A live token was cancelled.

    ``reason``: ``run_ended`` (the run ended, was cancelled or ran out of time with the token
    still live) or ``join_loser`` (a ``first`` or ``quorum`` join fired without it); ``join``:
    that join.
    """

    KIND: ClassVar[EventKind] = EventKind.TOKEN_CANCELLED
    reason: str
    join: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWarning(EventPayload):
    """Something went wrong that does not fail the run: a ``post`` phase failed, or the engine
    could not fire a due instant (its flow is not registered there) and put it back.

    ``message``: what happened; for a due instant put back, ``purpose`` (the due entry's
    purpose, empty for a wait or backoff) and ``due`` (its instant).
    """

    KIND: ClassVar[EventKind] = EventKind.WARNING
    message: str
    purpose: str | None = None
    due: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookFailed(EventPayload):
    """A hook raised on an event (this record is not passed to hooks).

    ``hook``: the hook's qualified name; ``event``: the kind of the event it got; ``error``:
    ``"<class>: <message>"``.
    """

    KIND: ClassVar[EventKind] = EventKind.HOOK_FAILED
    hook: str
    event: str
    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(EventPayload):
    """The run's last event.

    ``lifecycle``: how it ended; ``outcome``: the outcome of the first terminal reached, if
    any (not counting those of branches non-interrupting timers started); ``errors``: each as
    :meth:`ErrorInfo.to_dict <flowtide.engine.ErrorInfo.to_dict>` gives it (``type``,
    ``message``, ``placement``, ``details``, ``traceback``); ``sender``: who cancelled the run,
    when the cancel said.
    """

    KIND: ClassVar[EventKind] = EventKind.RUN_FINISHED
    lifecycle: str
    outcome: str | None
    errors: list[dict[str, Any]]
    sender: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked(EventPayload):
    """A node parked its token until a signal, its deadline or an escalation timer.

    ``key``: the correlation key a signal may address it by; ``deadline``: when the park times
    out, if ever; ``park``: the park's id.
    """

    KIND: ClassVar[EventKind] = EventKind.PARKED
    key: str | None
    deadline: str | None
    park: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Signalled(EventPayload):
    """A signal was accepted for park ``park``.

    ``output``: the output the token takes (none: the node runs again, the signal's payload in
    ``ctx.signal``); ``idempotency_key``: the signal's, if any; ``keys``: the state keys its
    payload sets; ``to``: where the token moved; ``sender``: who sent it, when it said.
    """

    KIND: ClassVar[EventKind] = EventKind.SIGNALLED
    output: str | None
    idempotency_key: str | None
    keys: list[str]
    park: str
    to: list[str] | None = None
    sender: str | None = None


Moving = (
    NodeFinished | NodeFailed | NodeTimedOut | TimerFired | JoinFired | SubflowFinished | Signalled
)
"""The payloads of events that move a token on (they say where, ``to``)."""

PAYLOADS: dict[EventKind, type[EventPayload]] = {
    cls.KIND: cls
    for cls in (
        RunStarted,
        NodeStarted,
        ProcessStarted,
        NodeFinished,
        NodeFailed,
        NodeTimedOut,
        NodeRetried,
        WaitStarted,
        TimerFired,
        JoinArrived,
        JoinFired,
        ScatterItemFinished,
        SubflowStarted,
        SubflowFinished,
        TerminalReached,
        TokenCancelled,
        RunWarning,
        HookFailed,
        RunFinished,
        Parked,
        Signalled,
    )
}
"""The payload class of each event kind."""
