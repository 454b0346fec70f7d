"""The Flowtide engine: runs flows on asyncio, with per-node timeouts that cancel only their node.

Public surface: :class:`Engine`, :class:`RunHandle`, :class:`RunResult`, :class:`Output`,
:class:`Park`, :class:`SignalReceipt`, :class:`Explanation`, :class:`NodeContext` (and a scatter
source function's :class:`SourceContext`), the lifecycle, events (their kinds, and a typed payload
per kind: :func:`payload_of`), and the errors (:class:`SignalRefused` among them). See
``docs/engine.md``.
"""

from flowtide.engine.context import NodeContext, SourceContext
from flowtide.engine.engine import Engine
from flowtide.engine.errors import (
    Cancelled,
    DrainedWithoutTerminal,
    EngineError,
    FailedTerminalError,
    LifecycleError,
    NodeTimeoutError,
    PrePhaseError,
    RecursionDepthError,
    RefusalReason,
    RequestPending,
    RunError,
    SignalRefused,
    SubflowFailedError,
    UndeclaredOutputError,
    UnknownFlowError,
    UnroutedOutputError,
)
from flowtide.engine.event_data import data_of, payload_of
from flowtide.engine.event_types import (
    ErrorData,
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
)
from flowtide.engine.events import EventKind, Hook
from flowtide.engine.handles import RunHandle, SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.output import Output, Park
from flowtide.engine.redaction import redact_errors
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult
from flowtide.engine.timing.explain import Explanation, TimerExplanation
from flowtide.engine.timing.scope import CancelReason

__all__ = [
    "CancelReason",
    "Cancelled",
    "DrainedWithoutTerminal",
    "Engine",
    "EngineError",
    "ErrorData",
    "ErrorInfo",
    "EventKind",
    "EventPayload",
    "Explanation",
    "FailedTerminalError",
    "Hook",
    "HookFailed",
    "InterruptedAt",
    "JoinArrived",
    "JoinFired",
    "Lifecycle",
    "LifecycleError",
    "NodeContext",
    "NodeFailed",
    "NodeFinished",
    "NodeRetried",
    "NodeStarted",
    "NodeTimedOut",
    "NodeTimeoutError",
    "Output",
    "Park",
    "Parked",
    "ParkedToken",
    "PrePhaseError",
    "ProcessStarted",
    "RecursionDepthError",
    "RefusalReason",
    "RequestPending",
    "RunError",
    "RunFinished",
    "RunHandle",
    "RunResult",
    "RunStarted",
    "RunWarning",
    "ScatterItemFinished",
    "SignalReceipt",
    "SignalRefused",
    "Signalled",
    "SourceContext",
    "SubflowFailedError",
    "SubflowFinished",
    "SubflowStarted",
    "TerminalReached",
    "TimerExplanation",
    "TimerFired",
    "TokenCancelled",
    "UndeclaredOutputError",
    "UnknownFlowError",
    "UnroutedOutputError",
    "WaitStarted",
    "data_of",
    "payload_of",
    "redact_errors",
]
