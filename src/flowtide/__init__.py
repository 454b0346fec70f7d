"""Flowtide: a durable workflow engine for Python.

The main API in one place::

    from flowtide import Engine, FlowBuilder, Output, Park, node, load_flow
"""

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock, VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import (
    Engine,
    Explanation,
    Lifecycle,
    NodeContext,
    NodeTimeoutError,
    Output,
    Park,
    RunHandle,
    RunResult,
    SignalReceipt,
    SignalRefused,
)
from flowtide.model import Flow

__version__ = "0.1.0"

__all__ = [
    "Engine",
    "Explanation",
    "Flow",
    "FlowBuilder",
    "Lifecycle",
    "NodeContext",
    "NodeTimeoutError",
    "Output",
    "Park",
    "RunHandle",
    "RunResult",
    "SignalReceipt",
    "SignalRefused",
    "SystemClock",
    "VirtualClock",
    "__version__",
    "load_flow",
    "node",
]
