"""Output contracts: the state a node's output carries, checked against the output's schema.

A node type may declare a JSON Schema per output (``output_schemas``, in Python on ``@node`` or
in a flow document's node types). With ``Engine(validate_outputs=True)`` the engine checks, after
each attempt that returns an output, the run state as that output would commit it (the node's
copy of the state with its ``Output.update``) against the output's schema. A violation is an
:class:`OutputContractError` naming the node, the placement, the output and where in the state
it broke: the token takes the placement's ``error`` route if it has one, otherwise the run
fails. Outputs without a schema are not checked. Validators are built once per schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine.errors import EngineError
from flowtide.model.flow import Flow

__all__ = ["OutputContractError", "OutputContracts"]


class OutputContractError(EngineError):
    """The state an output carries does not match that output's JSON Schema."""

    def __init__(self, node: str, placement: str, output: str, pointer: str, reason: str) -> None:
        self.node = node
        self.placement = placement
        self.output = output
        self.pointer = pointer
        self.reason = reason
        super().__init__(
            f"node {node!r} at placement {placement!r}: the state its output {output!r} carries "
            f"breaks the output's schema at {pointer or '/'}: {reason}"
        )


class OutputContracts:
    """The schemas of a process's flows' outputs, compiled on first use."""

    def __init__(self) -> None:
        self._validators: dict[tuple[str, str, str], Validator | None] = {}

    def check(
        self,
        flow: Flow,
        impl: NodeImplementation,
        placement: str,
        output: str,
        state: Mapping[str, Any],
    ) -> OutputContractError | None:
        """None if ``state`` fits ``output``'s schema (or it has none), else why not."""
        validator = self._validator(flow, impl, output)
        if validator is None:
            return None
        error = best_match(validator.iter_errors(dict(state)))
        if error is None:
            return None
        pointer = "".join(f"/{part}" for part in error.absolute_path)
        return OutputContractError(impl.id, placement, output, pointer, error.message)

    def _validator(self, flow: Flow, impl: NodeImplementation, output: str) -> Validator | None:
        key = (flow.id, impl.id, output)
        if key not in self._validators:
            schema = _schema(flow, impl, output)
            if schema is None:
                self._validators[key] = None
            else:
                cls = validators.validator_for(schema)
                cls.check_schema(schema)  # a broken schema is the node author's error, said once
                self._validators[key] = cls(schema)
        return self._validators[key]


def _schema(flow: Flow, impl: NodeImplementation, output: str) -> dict[str, Any] | None:
    """The output's schema: the flow document's node type's, else the implementation's."""
    declared = flow.node_type(impl.id)
    for node_type in (declared, impl.type):
        schemas = node_type.output_schemas if node_type is not None else None
        if schemas and output in schemas:
            return schemas[output]
    return None
