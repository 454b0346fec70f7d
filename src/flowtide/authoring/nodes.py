"""Node implementations: Python code bound to a :class:`~flowtide.model.NodeType`.

The :func:`node` decorator turns a sync or async function, or a class with a ``run`` method, into a
:class:`NodeImplementation`. A node is called with one argument, its context (see the engine), and
returns the name of an output.

A node's id defaults to ``module:qualified_name``. A flow names a node only by the id it is
registered under (``@node`` registers it when its module is imported): an engine never imports a
module because a flow names it, since a flow document may come from anyone who can write to the
store.
"""

from __future__ import annotations

import importlib
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from pydantic import ValidationError

from flowtide.errors import FlowValidationError, NodeResolutionError, Problem
from flowtide.model.flow import Flow
from flowtide.model.nodes import NodeType
from flowtide.model.settings import NodeSettings

Execution = Literal["thread", "inline", "process"]
"""Where sync node code runs: a worker thread (default), inline on the event loop (for cheap,
non-blocking code), or a subprocess that can be killed at the node's deadline."""

NODE_ATTRIBUTE = "__flowtide_node__"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True, eq=False)
class NodeImplementation:
    """A node's contract (``type``) and its code (``fn``)."""

    type: NodeType
    fn: Callable[..., Any]
    is_async: bool
    execution: Execution

    @property
    def id(self) -> str:
        return self.type.id

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.type.outputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<node {self.id} outputs={list(self.outputs)} execution={self.execution}>"


def _default_id(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _importable(ref: str) -> bool:
    return "<locals>" not in ref and "<lambda>" not in ref


def _build_type(
    obj: Any,
    *,
    id: str | None,
    outputs: tuple[str, ...],
    name: str | None,
    description: str | None,
    settings: Mapping[str, Any],
    output_schemas: Mapping[str, Mapping[str, Any]] | None,
    parks: bool = False,
) -> NodeType:
    node_id = id or _default_id(obj)
    ref = _default_id(obj)
    try:
        return NodeType(
            id=node_id,
            outputs=outputs,
            name=name,
            description=description if description is not None else inspect.getdoc(obj),
            settings=NodeSettings.model_validate(
                {k: v for k, v in settings.items() if v is not None}
            ),
            output_schemas={k: dict(v) for k, v in output_schemas.items()}
            if output_schemas
            else None,
            ref=ref if _importable(ref) else None,
            parks=parks,
        )
    except ValidationError as exc:
        raise FlowValidationError(
            [
                Problem(
                    f"node {node_id!r}: {err['msg']}",
                    pointer="/" + "/".join(str(x) for x in err["loc"]),
                )
                for err in exc.errors()
            ],
            title=f"invalid node {node_id!r}",
        ) from None


@overload
def node(fn: F, /) -> NodeImplementation: ...
@overload
def node(
    fn: None = None,
    /,
    *,
    outputs: tuple[str, ...] | list[str] = ...,
    id: str | None = ...,
    name: str | None = ...,
    description: str | None = ...,
    timeout: Any = ...,
    timeout_anchor: str | None = ...,
    release_on: tuple[str, ...] | list[str] | None = ...,
    timers: list[Mapping[str, Any]] | None = ...,
    retry: Mapping[str, Any] | None = ...,
    output_schemas: Mapping[str, Mapping[str, Any]] | None = ...,
    execution: Execution | None = ...,
    parks: bool = ...,
    register: bool = ...,
) -> Callable[[Callable[..., Any] | type], NodeImplementation]: ...


def node(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    outputs: tuple[str, ...] | list[str] = ("done",),
    id: str | None = None,
    name: str | None = None,
    description: str | None = None,
    timeout: Any = None,
    timeout_anchor: str | None = None,
    release_on: tuple[str, ...] | list[str] | None = None,
    timers: list[Mapping[str, Any]] | None = None,
    retry: Mapping[str, Any] | None = None,
    output_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    execution: Execution | None = None,
    parks: bool = False,
    register: bool = True,
) -> NodeImplementation | Callable[[Callable[..., Any] | type], NodeImplementation]:
    """Declare a node implementation.

    Use bare (``@node``, one output ``done``) or with arguments::

        @node(outputs=["paid", "declined"], timeout="PT10M", timeout_anchor="node")
        async def collect_payment(ctx): ...

    On a class, the class is instantiated with no arguments and its ``run`` method is the node.
    ``parks=True`` declares that the node may park (wait on the outside world), so that
    ``flowtide validate`` can warn about loops that park with no window bounding them.
    Settings are checked now: a bad one raises :class:`~flowtide.errors.FlowValidationError`.
    """

    def wrap(obj: Callable[..., Any] | type) -> NodeImplementation:
        settings = {
            "timeout": timeout,
            "timeout_anchor": timeout_anchor,
            "release_on": tuple(release_on) if release_on is not None else None,
            "timers": timers,
            "retry": retry,
        }
        node_type = _build_type(
            obj,
            id=id,
            outputs=tuple(outputs),
            name=name,
            description=description,
            settings=settings,
            output_schemas=output_schemas,
            parks=parks,
        )
        if isinstance(obj, type):
            run = getattr(obj(), "run", None)
            if run is None or not callable(run):
                raise TypeError(f"node class {obj.__qualname__} needs a 'run(self, ctx)' method")
            target: Callable[..., Any] = run
        else:
            target = obj
        is_async = inspect.iscoroutinefunction(target)
        if is_async and execution not in (None, "inline"):
            raise TypeError(
                f"node {node_type.id!r} is async; it always runs on the event loop "
                f"(execution={execution!r} is only for sync code)"
            )
        impl = NodeImplementation(
            type=node_type,
            fn=target,
            is_async=is_async,
            execution="inline" if is_async else (execution or "thread"),
        )
        if register:
            registry.register(impl)
        return impl

    if fn is not None:
        return wrap(fn)
    return wrap


class NodeRegistry:
    """Node implementations by id.

    Registering a second, different implementation under an id already taken raises, unless the
    new one has the same ``module:qualname`` (a module re-imported or a definition re-run).
    """

    def __init__(self, nodes: Mapping[str, NodeImplementation] | None = None) -> None:
        self._nodes: dict[str, NodeImplementation] = dict(nodes or {})
        self._lock = threading.Lock()

    def register(self, impl: NodeImplementation) -> NodeImplementation:
        with self._lock:
            old = self._nodes.get(impl.id)
            if old is not None and old is not impl and _default_id(old.fn) != _default_id(impl.fn):
                raise ValueError(
                    f"node id {impl.id!r} is already registered to {_default_id(old.fn)}; "
                    f"cannot register {_default_id(impl.fn)} under it"
                )
            self._nodes[impl.id] = impl
        return impl

    def get(self, ref: str) -> NodeImplementation | None:
        return self._nodes.get(ref)

    def __contains__(self, ref: object) -> bool:
        return ref in self._nodes

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._nodes))

    def __len__(self) -> int:
        return len(self._nodes)

    def resolve(self, ref: str) -> NodeImplementation:
        """The implementation registered under ``ref``; :class:`NodeResolutionError` naming it
        when there is none (nothing is imported because a flow names it)."""
        found = self._nodes.get(ref)
        if found is None:
            raise NodeResolutionError(missing_node(ref), nodes=[ref])
        return found


def missing_node(ref: str) -> str:
    """What to say of node ``ref`` when no implementation is registered under its id."""
    return f"node {ref!r} is not registered here: a --nodes module must register it (with @node)"


def import_node(ref: str) -> NodeImplementation:
    """Import ``module:attribute`` and return it as a node implementation: for code that names
    its own node (a node's subprocess imports it by the implementation's ``module:qualname``),
    never for a reference a flow makes.

    A plain function or class that was not decorated becomes a node with one output, ``done``.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise NodeResolutionError(
            f"node {ref!r} is not registered, and is not a 'module:attribute' reference"
        )
    return as_node(import_attribute(ref), ref=ref)


def import_attribute(ref: str, what: str = "node") -> Any:
    """The object ``module:attribute`` names, imported (``what`` names the reference in errors:
    a node, a scatter's source function). Raises :class:`~flowtide.errors.NodeResolutionError`
    when it does not resolve."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise NodeResolutionError(f"{what} {ref!r} is not a 'module:attribute' reference")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise NodeResolutionError(
            f"{what} {ref!r}: cannot import module {module_name!r}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise NodeResolutionError(
                f"{what} {ref!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj


def as_node(obj: Any, *, ref: str | None = None) -> NodeImplementation:
    """Coerce a decorated node, a decorated class or a plain callable to an implementation."""
    if isinstance(obj, NodeImplementation):
        return obj
    attached = getattr(obj, NODE_ATTRIBUTE, None)
    if isinstance(attached, NodeImplementation):
        return attached
    if callable(obj):
        return node(id=ref, register=False)(obj)
    raise NodeResolutionError(f"node {ref or obj!r} is not callable")


registry = NodeRegistry()
"""The process-wide registry that :func:`node` registers into by default."""


_GIVEN: dict[int, tuple[weakref.ref[Flow], dict[str, NodeImplementation]]] = {}
"""id(flow) -> the flow, and the node implementations its builder was given as objects."""


def give_nodes(flow: Flow, nodes: Mapping[str, NodeImplementation]) -> None:
    """Remember that ``flow`` was built with these implementations (see :func:`given_nodes`)."""
    key = id(flow)

    def forget(_: object) -> None:
        _GIVEN.pop(key, None)

    if nodes:
        _GIVEN[key] = (weakref.ref(flow, forget), dict(nodes))


def given_nodes(flow: Flow) -> Mapping[str, NodeImplementation]:
    """The node implementations the builder of ``flow`` (this very object) was given as
    objects: an engine given the flow runs them without their being registered anywhere else
    (``@node(register=False)``). A flow read from a document has none."""
    found = _GIVEN.get(id(flow))
    if found is None or found[0]() is not flow:
        return {}
    return found[1]
