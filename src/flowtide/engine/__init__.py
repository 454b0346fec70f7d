"""The Flowtide engine: runs flows on asyncio, with per-node timeouts that cancel only their node.

Public surface: :class:`Engine`, :class:`RunHandle`, :class:`RunResult`, :class:`Output`,
:class:`Park`, :class:`SignalReceipt`, :class:`Explanation`, :class:`NodeContext`, the lifecycle,
events, and the errors (:class:`SignalRefused` among them). See ``docs/engine.md``.
"""

from flowtide.engine.context import NodeContext
from flowtide.engine.engine import DEFER_UNFIREABLE, Engine, RunHandle, SignalReceipt
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
    RunError,
    SignalRefused,
    SubflowFailedError,
    UndeclaredOutputError,
    UnknownFlowError,
    UnroutedOutputError,
)
from flowtide.engine.events import EventKind, Hook
from flowtide.engine.explain import Explanation, TimerExplanation
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.output import Output, Park
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult
from flowtide.engine.scope import Cancellation, CancelReason, CancelScope

__all__ = [
    "DEFER_UNFIREABLE",
    "CancelReason",
    "CancelScope",
    "Cancellation",
    "Cancelled",
    "DrainedWithoutTerminal",
    "Engine",
    "EngineError",
    "ErrorInfo",
    "EventKind",
    "Explanation",
    "FailedTerminalError",
    "Hook",
    "InterruptedAt",
    "Lifecycle",
    "LifecycleError",
    "NodeContext",
    "NodeTimeoutError",
    "Output",
    "Park",
    "ParkedToken",
    "PrePhaseError",
    "RecursionDepthError",
    "RefusalReason",
    "RunError",
    "RunHandle",
    "RunResult",
    "SignalReceipt",
    "SignalRefused",
    "SubflowFailedError",
    "TimerExplanation",
    "UndeclaredOutputError",
    "UnknownFlowError",
    "UnroutedOutputError",
    "transition",
]
