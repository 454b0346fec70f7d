"""The Flowtide engine: runs flows on asyncio, with per-node timeouts that cancel only their node.

Public surface: :class:`Engine`, :class:`RunHandle`, :class:`RunResult`, :class:`Output`,
:class:`NodeContext`, the lifecycle, events, and the errors. See ``docs/engine.md``.
"""

from flowtide.engine.context import NodeContext
from flowtide.engine.engine import Engine, RunHandle
from flowtide.engine.errors import (
    Cancelled,
    DrainedWithoutTerminal,
    EngineError,
    FailedTerminalError,
    LifecycleError,
    NodeTimeoutError,
    PrePhaseError,
    RecursionDepthError,
    RunError,
    SubflowFailedError,
    UndeclaredOutputError,
    UnknownFlowError,
    UnroutedOutputError,
)
from flowtide.engine.events import EventKind, Hook
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.output import Output
from flowtide.engine.result import ErrorInfo, InterruptedAt, RunResult
from flowtide.engine.scope import Cancellation, CancelReason, CancelScope

__all__ = [
    "CancelReason",
    "CancelScope",
    "Cancellation",
    "Cancelled",
    "DrainedWithoutTerminal",
    "Engine",
    "EngineError",
    "ErrorInfo",
    "EventKind",
    "FailedTerminalError",
    "Hook",
    "InterruptedAt",
    "Lifecycle",
    "LifecycleError",
    "NodeContext",
    "NodeTimeoutError",
    "Output",
    "PrePhaseError",
    "RecursionDepthError",
    "RunError",
    "RunHandle",
    "RunResult",
    "SubflowFailedError",
    "UndeclaredOutputError",
    "UnknownFlowError",
    "UnroutedOutputError",
    "transition",
]
