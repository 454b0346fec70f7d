"""Authoring flows in Python: the node, reducer and source decorators, and the fluent builder."""

from flowtide.authoring.builder import FlowBuilder
from flowtide.authoring.functions import FunctionRegistry, reducer, reducers, source, sources
from flowtide.authoring.nodes import (
    Execution,
    NodeImplementation,
    NodeRegistry,
    as_node,
    import_node,
    node,
    registry,
)

__all__ = [
    "Execution",
    "FlowBuilder",
    "FunctionRegistry",
    "NodeImplementation",
    "NodeRegistry",
    "as_node",
    "import_node",
    "node",
    "reducer",
    "reducers",
    "registry",
    "source",
    "sources",
]
