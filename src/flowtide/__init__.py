"""Flowtide: a durable workflow engine for Python.

What a user needs, in one place::

    from flowtide import Engine, FlowBuilder, Output, Park, node, load_flow

* build a flow: :class:`FlowBuilder`, :func:`node`, :class:`Flow`, :func:`load_flow`,
  :func:`dump_flow`; register the code a flow names: :func:`node`, :func:`reducer`,
  :func:`source`;
* run it: :class:`Engine`, :class:`RunHandle`, :class:`RunResult` (with :class:`ParkedToken`,
  :class:`InterruptedAt`, :class:`ErrorInfo`), :class:`Lifecycle`, :class:`NodeContext`,
  :class:`Output`, :class:`Park`, :class:`SignalReceipt`, :class:`Explanation`;
* keep runs: :class:`Store`, :class:`MemoryStore`;
* act on stored runs from an application (workers run them): :class:`Client`,
  :class:`AsyncClient`;
* watch them: :class:`EventKind`, :data:`Hook`, :class:`EventRecord`;
* keep time: :class:`Clock`, :class:`SystemClock`, :class:`VirtualClock`;
* handle what goes wrong: :class:`FlowtideError` and the errors a caller catches.

The rest (placement models, documents, store records, the engine's parts) stays in the
subpackages: ``flowtide.model``, ``flowtide.documents``, ``flowtide.store``, ``flowtide.engine``.
"""

from flowtide.authoring import FlowBuilder, node, reducer, source
from flowtide.client import AsyncClient, Client
from flowtide.clock import Clock, SystemClock, VirtualClock
from flowtide.documents import dump_flow, load_flow
from flowtide.engine import (
    Cancelled,
    Engine,
    EngineError,
    ErrorInfo,
    EventKind,
    Explanation,
    Hook,
    InterruptedAt,
    Lifecycle,
    NodeContext,
    NodeTimeoutError,
    Output,
    Park,
    ParkedToken,
    RefusalReason,
    RequestPending,
    RunError,
    RunHandle,
    RunResult,
    SignalReceipt,
    SignalRefused,
    UnknownFlowError,
)
from flowtide.errors import FlowtideError, FlowValidationError, NodeResolutionError, Problem
from flowtide.model import Flow
from flowtide.store import EventRecord, MemoryStore, Store, StoreError, UnknownRunError

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Cancelled",
    "Client",
    "Clock",
    "Engine",
    "EngineError",
    "ErrorInfo",
    "EventKind",
    "EventRecord",
    "Explanation",
    "Flow",
    "FlowBuilder",
    "FlowValidationError",
    "FlowtideError",
    "Hook",
    "InterruptedAt",
    "Lifecycle",
    "MemoryStore",
    "NodeContext",
    "NodeResolutionError",
    "NodeTimeoutError",
    "Output",
    "Park",
    "ParkedToken",
    "Problem",
    "RefusalReason",
    "RequestPending",
    "RunError",
    "RunHandle",
    "RunResult",
    "SignalReceipt",
    "SignalRefused",
    "Store",
    "StoreError",
    "SystemClock",
    "UnknownFlowError",
    "UnknownRunError",
    "VirtualClock",
    "__version__",
    "dump_flow",
    "load_flow",
    "node",
    "reducer",
    "source",
]
