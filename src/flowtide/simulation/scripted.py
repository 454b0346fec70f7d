"""Scripted nodes: the code of a placement replaced by the steps a script gives it.

The engine finds a node's code by the node's reference, not by placement, so the replacement is
one implementation per reference that a scripted placement names, which looks at the placement
of each attempt (``ctx.placement``): a scripted placement takes its next step; once its steps are
used up, or at a placement the script leaves alone, the real implementation runs (or, without
one, the attempt fails with :class:`ScriptUsedUp`, naming the placement).

Only the code is replaced. The replacement carries the real implementation's node type (its
outputs and its default settings), so the effective settings of every placement (timeout,
anchor, release, timers, retries) and where ``explain`` says each came from are unchanged. When
the node has no implementation, it carries the node type the flow document declares, its settings
left to that declaration (where the flow's settings are read from anyway).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
from flowtide.engine import NodeContext, Park
from flowtide.model.flow import Flow, node_ref
from flowtide.model.nodes import NodeType
from flowtide.model.settings import NodeSettings
from flowtide.simulation.script import NodeStep

__all__ = ["Resolve", "ScriptUsedUp", "ScriptedFailure", "ScriptedNodes"]

Resolve = Callable[[str], NodeImplementation | None]
"""A node reference -> its real implementation (None when it has none)."""


class ScriptedFailure(Exception):
    """What a scripted ``raise`` step raises: its message is the step's."""

    def __init__(self, message: str, placement: str) -> None:
        self.placement = placement
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement, "scripted": True}


class ScriptUsedUp(Exception):
    """A placement ran out of scripted steps and its node has no implementation to run."""

    def __init__(self, placement: str, node: str, steps: int) -> None:
        self.placement = placement
        self.node = node
        self.steps = steps
        given = f"its {steps} scripted step(s) are used up" if steps else "it has no scripted step"
        super().__init__(
            f"placement {placement!r}: {given}, and node {node!r} has no implementation to run "
            "(script another step, or give the module that implements it)"
        )

    def details(self) -> dict[str, Any]:
        return {"placement": self.placement, "node": self.node, "steps": self.steps}


class ScriptedNodes:
    """The replacement implementations for a script's ``nodes`` over ``flows``."""

    def __init__(
        self, steps: Mapping[str, Sequence[NodeStep]], flows: Sequence[Flow], resolve: Resolve
    ) -> None:
        self._steps = {placement: tuple(given) for placement, given in steps.items()}
        self._taken: dict[str, int] = {}
        self._real: dict[str, NodeImplementation | None] = {}
        self._resolve = resolve
        self.implementations: dict[str, NodeImplementation] = {}
        """Node reference -> its replacement."""
        for flow in flows:
            for placement in flow.placements:
                ref = node_ref(placement)
                if ref is None or placement.id not in self._steps:
                    continue
                if ref in self.implementations:
                    continue
                node_type = self._node_type(flow, ref)
                if node_type is not None:
                    self.implementations[ref] = NodeImplementation(
                        type=node_type, fn=self._runner(ref), is_async=True, execution="inline"
                    )

    def real(self, ref: str) -> NodeImplementation | None:
        """The node's real implementation, if it has one (looked up once)."""
        if ref not in self._real:
            self._real[ref] = self._resolve(ref)
        return self._real[ref]

    def outputs(self, flow: Flow, placement: str) -> tuple[str, ...] | None:
        """The outputs the node at ``placement`` of ``flow`` declares (None: not known)."""
        if not flow.has_placement(placement):
            return None
        ref = node_ref(flow.placement(placement))
        if ref is None:
            return None
        impl = self.implementations.get(ref) or self.real(ref)
        if impl is not None:
            return impl.outputs
        declared = flow.node_type(ref)
        return declared.outputs if declared is not None else None

    def registry(self, base: NodeRegistry | None = None) -> NodeRegistry:
        """``base``'s nodes, the replacements in the place of those they replace."""
        nodes: dict[str, NodeImplementation] = {}
        if base is not None:
            nodes = {ref: impl for ref in base if (impl := base.get(ref)) is not None}
        nodes.update(self.implementations)
        return NodeRegistry(nodes)

    def taken(self, placement: str) -> int:
        """How many of ``placement``'s steps have been played."""
        return self._taken.get(placement, 0)

    def _node_type(self, flow: Flow, ref: str) -> NodeType | None:
        real = self.real(ref)
        if real is not None:
            return real.type
        declared = flow.node_type(ref)
        if declared is None:
            return None  # its outputs are not known: the script's check says so
        return declared.model_copy(update={"settings": NodeSettings()})

    def _next(self, placement: str) -> NodeStep | None:
        given = self._steps.get(placement, ())
        taken = self._taken.get(placement, 0)
        if taken >= len(given):
            return None
        self._taken[placement] = taken + 1
        return given[taken]

    def _runner(self, ref: str) -> Callable[[NodeContext], Any]:
        async def scripted(ctx: NodeContext) -> Any:
            step = self._next(ctx.placement)
            if step is not None:
                return await perform(step, ctx)
            real = self.real(ref)
            if real is None:
                raise ScriptUsedUp(ctx.placement, ref, len(self._steps.get(ctx.placement, ())))
            return await call(real, ctx)

        scripted.__qualname__ = f"scripted[{ref}]"
        return scripted


async def perform(step: NodeStep, ctx: NodeContext) -> Any:
    """Play one step: wait ``after`` on the run's clock, then raise, park or return."""
    if step.after is not None:
        await ctx.clock.sleep(step.after)
    if step.raise_ is not None:
        raise ScriptedFailure(step.raise_, ctx.placement)
    if step.update:
        ctx.state.update(copy.deepcopy(step.update))
    if step.park is not None:
        return Park(key=step.park.key, payload=copy.deepcopy(step.park.payload))
    return step.output


async def call(impl: NodeImplementation, ctx: NodeContext) -> Any:
    """Run a real implementation as the engine would: on the loop, or in a worker thread (a
    process-isolated node runs in a thread here)."""
    if impl.is_async:
        return await impl.fn(ctx)
    if impl.execution == "inline":
        return impl.fn(ctx)
    with ctx.clock.hold():  # the clock cannot see a thread's work
        return await asyncio.to_thread(impl.fn, ctx)
