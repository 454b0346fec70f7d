"""A fluent builder for flows in Python.

Each method checks its own placement at once and raises
:class:`~flowtide.errors.FlowValidationError` naming the placement; :meth:`FlowBuilder.build` then
checks the whole graph (routes lead somewhere, every reachable part can end, ...).

Example::

    flow = (
        FlowBuilder("urn:shop:flow:checkout")
        .task("collect-payment", collect_payment, {"paid": "done", "declined": "offer-retry"},
              timeout="PT10M", timeout_anchor="node")
        .task("offer-retry", offer_retry, {"retry": "collect-payment", "give-up": "done"})
        .terminal("done")
        .build()
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from pydantic import TypeAdapter, ValidationError

from flowtide.authoring.functions import FunctionRegistry, reducers, sources
from flowtide.authoring.nodes import NodeImplementation, NodeRegistry, give_nodes
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow
from flowtide.model.nodes import NodeType
from flowtide.model.placements import KIND_NAMES, RESERVED_OUTPUTS, AnyPlacement, Placement

_PLACEMENT: TypeAdapter[AnyPlacement] = TypeAdapter(Placement)

NodeRef = NodeImplementation | str
RouteMap = Mapping[str, str | Sequence[str]]
_DECORATOR = {"reducer": "reducer", "source function": "source"}
_SETTING_NAMES = ("timeout", "timeout_anchor", "release_on", "timers", "retry")


class FlowBuilder:
    """Builds a :class:`~flowtide.model.Flow` placement by placement (see the module's example);
    :meth:`build` checks it as a whole."""

    def __init__(
        self,
        id: str,
        version: str = "1",
        *,
        name: str | None = None,
        description: str | None = None,
        registry: NodeRegistry | None = None,
    ) -> None:
        self._flow: dict[str, Any] = {
            "id": id,
            "version": version,
            "name": name,
            "description": description,
        }
        self._placements: list[AnyPlacement] = []
        self._ids: set[str] = set()
        self._entrypoints: dict[str, str] = {}
        self._node_types: dict[str, NodeType] = {}
        self._given: dict[str, NodeImplementation] = {}
        """The node implementations given as objects (an engine given the flow runs them)."""
        self._reducers: dict[str, str] = {}
        self._catalog: dict[str, Flow] = {}
        self.registry = registry if registry is not None else NodeRegistry()
        """Implementations used by this flow (for an engine to run it)."""

    # -- placements --------------------------------------------------------------------------

    def task(
        self,
        id: str,
        node: NodeRef,
        routes: RouteMap | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        **settings: Any,
    ) -> Self:
        """A task running ``node``; ``routes`` maps its outputs to the next placement(s)."""
        return self._add(
            id,
            impl=node,
            kind="task",
            node=self._use_node(id, node),
            routes=_routes(routes),
            name=name,
            description=description,
            settings=_settings(id, settings),
        )

    def wait(
        self,
        id: str,
        duration: Any = None,
        *,
        until: Any = None,
        then: str | Sequence[str] | None = None,
        name: str | None = None,
    ) -> Self:
        """A durable timer; ``then`` is where ``elapsed`` leads."""
        routes = {"elapsed": then} if then is not None else {}
        return self._add(
            id, kind="wait", duration=duration, until=until, routes=_routes(routes), name=name
        )

    def join(
        self,
        id: str,
        mode: str = "all",
        routes: RouteMap | None = None,
        *,
        quorum: int | None = None,
        name: str | None = None,
        **settings: Any,
    ) -> Self:
        """A join: ``all``, ``first`` (cancels the others) or ``quorum`` (with ``quorum=n``)."""
        return self._add(
            id,
            kind="join",
            mode=mode,
            quorum=quorum,
            routes=_routes(routes),
            name=name,
            settings=_settings(id, settings),
        )

    def scatter(
        self,
        id: str,
        source: str | Callable[..., Any] | None,
        body: NodeRef | Flow,
        routes: RouteMap | None = None,
        *,
        source_fn: str | Callable[..., Any] | None = None,
        item_key: str = "item",
        input: Mapping[str, str] | None = None,
        concurrency: int = 1,
        throttle: float | None = None,
        batch: Mapping[str, Any] | None = None,
        gather: Mapping[str, Any] | None = None,
        on_failure: str = "continue",
        name: str | None = None,
        **settings: Any,
    ) -> Self:
        """Run ``body`` (a node or a flow) per item of the state collection at ``source`` (a
        state path), or per item a source function gives: ``source`` may be that function, or
        give ``source=None`` and ``source_fn`` (the function, or the id it is registered under
        with ``@flowtide.source``). A function given here is registered if it is not yet
        (under its ``module:qualname``, so it must be defined at a module's top level); workers
        in other processes know it when its module registers it with ``@flowtide.source``."""
        if isinstance(body, Flow):
            self._catalog[body.id] = body
            body_spec: dict[str, str] = {"flow": body.id}
        else:
            body_spec = {"node": self._use_node(id, body)}
        if callable(source):
            if source_fn is not None:
                raise FlowValidationError(
                    [Problem(f"scatter {id!r} takes one source function, not two", placement=id)]
                )
            source, source_fn = None, source
        return self._add(
            id,
            kind="scatter",
            source=source,
            source_fn=self._use_function(id, source_fn, sources),
            body=body_spec,
            routes=_routes(routes),
            item_key=item_key,
            input=dict(input or {}),
            concurrency=concurrency,
            throttle=throttle,
            batch=batch,
            gather=dict(gather) if gather is not None else {},
            on_failure=on_failure,
            name=name,
            settings=_settings(id, settings),
        )

    def subflow(
        self,
        id: str,
        flow: Flow | str,
        routes: RouteMap | None = None,
        *,
        input: Mapping[str, str] | None = None,
        output: Mapping[str, str] | None = None,
        name: str | None = None,
        **settings: Any,
    ) -> Self:
        """Run another flow as a child; routes ``success`` or ``error``."""
        if isinstance(flow, Flow):
            self._catalog[flow.id] = flow
            flow = flow.id
        return self._add(
            id,
            kind="subflow",
            flow=flow,
            routes=_routes(routes),
            input=dict(input or {}),
            output=dict(output or {}),
            name=name,
            settings=_settings(id, settings),
        )

    def phase(
        self, id: str, phase: str, node: NodeRef, *, name: str | None = None, **settings: Any
    ) -> Self:
        """A ``pre`` or ``post`` phase running ``node``."""
        ref = self._use_node(id, node)
        return self._add(
            id, kind="phase", phase=phase, node=ref, name=name, settings=_settings(id, settings)
        )

    def terminal(self, id: str, outcome: str = "completed", *, name: str | None = None) -> Self:
        """Where a branch ends, with an outcome (``completed``, ``failed`` or your own)."""
        return self._add(id, kind="terminal", outcome=outcome, name=name)

    # -- flow-level --------------------------------------------------------------------------

    def entrypoint(self, label: str, placement: str) -> Self:
        """Add an entrypoint. Without any, the first placement that is not a phase is ``main``."""
        if label in self._entrypoints:
            raise FlowValidationError(
                [Problem(f"entrypoint {label!r} is declared twice", f"/entrypoints/{label}")]
            )
        self._entrypoints[label] = placement
        return self

    def reducer(self, key: str, how: str | Callable[[Any, Any], Any]) -> Self:
        """How parallel branches' writes to state ``key`` merge (default: last write wins): a
        built-in reducer's name, a function ``fn(current, value)`` (registered if it is not yet,
        as for a source function) or the id it is registered under with ``@flowtide.reducer``."""
        self._reducers[key] = self._use_function(None, how, reducers) or "last"
        return self

    def deadline(self, duration: Any) -> Self:
        """The default run deadline of this flow."""
        self._flow["deadline"] = duration
        return self

    def uses(self, flow: Flow) -> Self:
        """Make ``flow`` known for checking subflow references to it."""
        self._catalog[flow.id] = flow
        return self

    def build(self) -> Flow:
        """The flow, checked as a whole (errors raise; warnings do not)."""
        from flowtide.validation import check_flow

        entrypoints = dict(self._entrypoints)
        if not entrypoints:
            first = next((p.id for p in self._placements if p.kind != "phase"), None)
            if first is not None:
                entrypoints["main"] = first
        data = {k: v for k, v in self._flow.items() if v is not None}
        data.update(
            entrypoints=entrypoints,
            placements=self._placements,
            node_types=tuple(self._node_types.values()),
            reducers=self._reducers,
        )
        try:
            flow = Flow.model_validate(data)
        except ValidationError as exc:
            raise FlowValidationError(_problems(exc, "")) from None
        problems = check_flow(flow, catalog=self._catalog, registry=self.registry)
        if any(p.severity == "error" for p in problems):
            raise FlowValidationError(problems)
        give_nodes(flow, self._given)
        return flow

    # -- internals ---------------------------------------------------------------------------

    def _add(self, id: str, *, impl: NodeRef | None = None, **fields: Any) -> Self:
        """Check the placement (and, given its node, the outputs it routes), then keep it."""
        if id in self._ids:
            raise FlowValidationError([Problem(f"placement id {id!r} is used twice", placement=id)])
        data = {k: v for k, v in fields.items() if v is not None}
        data["id"] = id
        try:
            placement = _PLACEMENT.validate_python(data)
        except ValidationError as exc:
            raise FlowValidationError(_problems(exc, id)) from None
        if impl is not None:
            self._check_outputs(placement, impl)
        self._placements.append(placement)
        self._ids.add(id)
        return self

    def _use_node(self, placement: str, node: NodeRef) -> str:
        if isinstance(node, str):
            return node
        if not isinstance(node, NodeImplementation):
            raise FlowValidationError(
                [
                    Problem(
                        f"node must be a @node implementation or a reference, not {node!r}",
                        placement=placement,
                    )
                ]
            )
        self.registry.register(node)
        self._given[node.id] = node
        self._node_types[node.id] = node.type
        return node.id

    @staticmethod
    def _use_function(
        placement: str | None, fn: str | Callable[..., Any] | None, known: FunctionRegistry
    ) -> str | None:
        """A reducer's or source function's id: as given, the id ``fn`` is registered under, or
        its ``module:qualname``, under which it is registered now (refused for a nested function
        or a lambda, which no other process can register by that name)."""
        if fn is None or isinstance(fn, str):
            return fn
        found = known.id_of(fn)
        if found is not None:
            return found
        ref = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"
        if "<" in ref:
            raise FlowValidationError(
                [
                    Problem(
                        f"{known.kind} {fn!r} has no id: define it at a module's top level, or "
                        f"register it with an id of its own (@flowtide.{_DECORATOR[known.kind]})",
                        placement=placement,
                    )
                ]
            )
        return known.register(fn, ref)

    def _check_outputs(self, placement: AnyPlacement, node: NodeRef) -> None:
        """Routes name only outputs the node declares, the engine's, or its timers' outputs."""
        if not isinstance(node, NodeImplementation):
            return
        settings = node.type.settings.overlay(placement.node_settings())
        allowed = set(node.outputs) | RESERVED_OUTPUTS | {t.output for t in settings.timers or ()}
        unknown = [o for o in placement.route_map() if o not in allowed]
        if unknown:
            raise FlowValidationError(
                [
                    Problem(
                        f"node {node.id!r} does not declare output {o!r} "
                        f"(it declares {', '.join(node.outputs)})",
                        placement=placement.id,
                    )
                    for o in unknown
                ]
            )


def _routes(routes: RouteMap | None) -> dict[str, Any]:
    return {k: v if isinstance(v, str) else list(v) for k, v in (routes or {}).items()}


def _settings(placement: str, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    unknown = sorted(set(settings) - set(_SETTING_NAMES))
    if unknown:
        raise FlowValidationError(
            [
                Problem(
                    f"unknown setting {name!r} (settings are: {', '.join(_SETTING_NAMES)})",
                    placement=placement,
                )
                for name in unknown
            ]
        )
    chosen = {k: v for k, v in settings.items() if v is not None}
    return chosen or None


def _problems(exc: ValidationError, placement: str) -> list[Problem]:
    out = []
    for err in exc.errors():
        parts = list(err["loc"])
        if placement and parts and parts[0] in KIND_NAMES:
            parts = parts[1:]  # the discriminator's tag, not a field
        loc = "/".join(str(x) for x in parts)
        where = f" at {loc!r}" if loc else ""
        out.append(
            Problem(
                f"{err['msg']}{where}",
                placement=placement or None,
                pointer="" if placement else f"/{loc}",
            )
        )
    return out
