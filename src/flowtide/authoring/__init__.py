"""Authoring flows in Python: the node decorator and the fluent builder."""

from flowtide.authoring.builder import FlowBuilder
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
    "NodeImplementation",
    "NodeRegistry",
    "as_node",
    "import_node",
    "node",
    "registry",
]
