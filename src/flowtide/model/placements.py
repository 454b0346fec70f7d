"""Placements: a node's position in a flow, one class per kind.

A placement's ``routes`` map each output to the placement(s) it leads to; an output that routes to
several placements is a parallel split. Which outputs a kind can take is fixed here
(:meth:`Placement.fixed_outputs`) or, for tasks, comes from the node implementation.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    field_validator,
    model_validator,
)

from flowtide.model.durations import Duration
from flowtide.model.settings import NodeSettings

TIMEOUT_OUTPUT = "timeout"
"""The output a placement takes when its window ends, if the placement routes it."""
PARKED_OUTPUT = "parked"
"""The reserved output by which a loaded document's node parks (as in documents written for
a DAG engine)."""
RESERVED_OUTPUTS = frozenset({TIMEOUT_OUTPUT, PARKED_OUTPUT})


def _targets(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    return value


def _dump_targets(value: tuple[str, ...]) -> str | list[str]:
    return value[0] if len(value) == 1 else list(value)


Targets = Annotated[
    tuple[str, ...],
    BeforeValidator(_targets),
    PlainSerializer(_dump_targets),
    Field(min_length=1),
]
"""Where one output leads: one placement id, or several (a parallel split)."""

Routes = dict[str, Targets]


class _Placement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    id: str = Field(min_length=1, description="The placement's id, unique in its flow.")
    name: str | None = Field(default=None, description="A display label.")
    description: str | None = None

    #: Outputs every placement of this kind can take, whatever its node.
    fixed_outputs: ClassVar[tuple[str, ...]] = ()
    #: Whether the kind accepts node settings (timeout, retry, timers…).
    has_settings: ClassVar[bool] = False

    @property
    def label(self) -> str:
        return self.name or self.id

    def route_map(self) -> Routes:
        return getattr(self, "routes", {})

    def node_settings(self) -> NodeSettings | None:
        return getattr(self, "settings", None)

    def successors(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for targets in self.route_map().values():
            for t in targets:
                seen.setdefault(t, None)
        return tuple(seen)


class Task(_Placement):
    """Runs a node implementation; the output it returns picks the next placement(s)."""

    kind: Literal["task"] = "task"
    node: str = Field(min_length=1, description="The node: an IRI or 'module:attribute'.")
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    has_settings: ClassVar[bool] = True


class Wait(_Placement):
    """A durable timer: waits ``duration`` after arrival, or until ``until``; routes ``elapsed``."""

    kind: Literal["wait"] = "wait"
    duration: Duration | None = None
    until: datetime | None = Field(default=None, description="An instant with a time zone.")
    routes: Routes = Field(default_factory=dict)
    fixed_outputs: ClassVar[tuple[str, ...]] = ("elapsed",)

    @field_validator("until")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("'until' needs a time zone (for example '2026-01-01T00:00:00Z')")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> Wait:
        if (self.duration is None) == (self.until is None):
            raise ValueError("a wait needs exactly one of 'duration' and 'until'")
        if self.duration is not None and self.duration.total_seconds() <= 0:
            raise ValueError("a wait's duration must be greater than zero")
        return self


class JoinMode(StrEnum):
    ALL = "all"
    FIRST = "first"
    QUORUM = "quorum"


class Join(_Placement):
    """Merges branches: ``all``, ``first`` (the others are cancelled) or ``quorum`` of them."""

    kind: Literal["join"] = "join"
    mode: JoinMode = JoinMode.ALL
    quorum: int | None = Field(default=None, ge=1)
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    fixed_outputs: ClassVar[tuple[str, ...]] = ("success", "error", "empty")
    has_settings: ClassVar[bool] = True

    @model_validator(mode="after")
    def _quorum(self) -> Join:
        if self.mode is JoinMode.QUORUM and self.quorum is None:
            raise ValueError("a quorum join needs 'quorum' (how many branches must arrive)")
        if self.mode is not JoinMode.QUORUM and self.quorum is not None:
            raise ValueError("'quorum' is only for mode 'quorum'")
        return self


class GatherStrategy(StrEnum):
    APPEND = "append"
    """A list in source order."""
    COLLECT = "collect"
    """A list in completion order."""
    PARTITION = "partition"
    """A mapping from each item's output to the list of results that took it."""
    MAP = "map"
    """A mapping from each item's key to its result."""
    REDUCE = "reduce"
    """A user function folds the results (``reducer``)."""


class Gather(BaseModel):
    """How a scatter puts its items' results back into the parent's state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: GatherStrategy = GatherStrategy.APPEND
    target: str = Field(default="results", min_length=1, description="State path written.")
    field: str | None = Field(
        default=None, description="Path in each item's final state to take (default: all of it)."
    )
    key: str | None = Field(default=None, description="Item path used as the key ('map').")
    reducer: str | None = Field(
        default=None, description="'module:function' folding (accumulator, result) ('reduce')."
    )
    initial: JsonValue = Field(default=None, description="The reduce accumulator's first value.")

    @model_validator(mode="after")
    def _needs(self) -> Gather:
        if self.strategy is GatherStrategy.MAP and not self.key:
            raise ValueError("gather strategy 'map' needs 'key'")
        if self.strategy is GatherStrategy.REDUCE and not self.reducer:
            raise ValueError("gather strategy 'reduce' needs 'reducer'")
        return self


class KeyedBatches(BaseModel):
    """Group items by a key and hand the body one batch per key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(min_length=1, description="Path in each item giving its batch key.")
    size: int = Field(default=100, ge=1, description="A batch is released when it has this many.")
    idle: Duration | None = Field(
        default=None, description="A batch is released when no item joined it for this long."
    )


class FailurePolicy(StrEnum):
    CONTINUE = "continue"
    """Run every item; failures are gathered and decide the route."""
    FAIL_FAST = "fail_fast"
    """Stop starting items at the first failure and route ``all-error`` or ``partial``."""


class Body(BaseModel):
    """What a scatter runs per item: a node, or a whole flow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str | None = None
    flow: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Body:
        if (self.node is None) == (self.flow is None):
            raise ValueError("a scatter body needs exactly one of 'node' and 'flow'")
        return self


def _is_function_ref(ref: str) -> bool:
    """Whether ``ref`` reads as ``module:function`` (a dotted module, a dotted attribute)."""
    module, sep, attr = ref.partition(":")
    return bool(sep) and all(part.isidentifier() for part in (*module.split("."), *attr.split(".")))


class Scatter(_Placement):
    """Runs ``body`` once per item, then gathers the results.

    The items come from exactly one of ``source`` (the state path of a JSON collection) and
    ``source_fn`` (a ``module:function`` called when the scatter starts, giving the items
    lazily: an iterable or an async iterable of JSON items; see :mod:`flowtide.engine.scatter`).
    """

    kind: Literal["scatter"] = "scatter"
    source: str | None = Field(
        default=None, min_length=1, description="State path of the collection of items."
    )
    source_fn: str | None = Field(
        default=None,
        min_length=1,
        description="'module:function' giving the items instead of 'source': called with a "
        "read-only view of the run state, it returns an iterable or an async iterable of JSON "
        "items, pulled one at a time; it must give the same items in the same order when called "
        "again (a resumed scatter skips finished items by index).",
    )
    item_key: str = Field(default="item", min_length=1, description="Where each item is put.")
    body: Body
    input: dict[str, str] = Field(
        default_factory=dict, description="Item state path <- parent state path."
    )
    concurrency: int = Field(default=1, ge=1)
    throttle: float | None = Field(default=None, gt=0, description="Items started per second.")
    batch: KeyedBatches | None = None
    gather: Gather = Field(default_factory=Gather)
    on_failure: FailurePolicy = FailurePolicy.CONTINUE
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    fixed_outputs: ClassVar[tuple[str, ...]] = ("all-success", "partial", "all-error", "empty")
    has_settings: ClassVar[bool] = True

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["source"]}, {"required": ["source_fn"]}]}
    )

    @field_validator("source_fn")
    @classmethod
    def _function_ref(cls, v: str | None) -> str | None:
        if v is not None and not _is_function_ref(v):
            raise ValueError(f"'source_fn' must be a 'module:function' reference, not {v!r}")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Scatter:
        if (self.source is None) == (self.source_fn is None):
            raise ValueError(
                "a scatter needs exactly one of 'source' (a state path) and 'source_fn' "
                "(a 'module:function' giving the items)"
            )
        return self

    @model_validator(mode="after")
    def _throttle_or_batch(self) -> Scatter:
        if self.throttle is not None and self.batch is not None:
            raise ValueError("a scatter takes a throttle or keyed batches, not both")
        return self


class Subflow(_Placement):
    """Runs another flow as a child; routes ``success`` or ``error`` by how the child ended."""

    kind: Literal["subflow"] = "subflow"
    flow: str = Field(min_length=1, description="The child flow's id.")
    input: dict[str, str] = Field(
        default_factory=dict, description="Child state path <- parent state path."
    )
    output: dict[str, str] = Field(
        default_factory=dict, description="Parent state path <- child state path."
    )
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    fixed_outputs: ClassVar[tuple[str, ...]] = ("success", "error")
    has_settings: ClassVar[bool] = True


class PhaseKind(StrEnum):
    PRE = "pre"
    POST = "post"


class Phase(_Placement):
    """``pre`` runs before the entrypoints; ``post`` after the run ends, whatever the end."""

    kind: Literal["phase"] = "phase"
    node: str = Field(min_length=1)
    phase: PhaseKind
    settings: NodeSettings | None = None
    has_settings: ClassVar[bool] = True


class Terminal(_Placement):
    """Ends the run with an outcome: ``completed``, ``failed``, or a name of the user's."""

    kind: Literal["terminal"] = "terminal"
    outcome: str = Field(default="completed", min_length=1)

    @property
    def fails(self) -> bool:
        return self.outcome == "failed"


Placement = Annotated[
    Task | Wait | Join | Scatter | Subflow | Phase | Terminal, Field(discriminator="kind")
]
PLACEMENT_KINDS: tuple[type[_Placement], ...] = (
    Task,
    Wait,
    Join,
    Scatter,
    Subflow,
    Phase,
    Terminal,
)
KIND_NAMES: tuple[str, ...] = tuple(k.model_fields["kind"].default for k in PLACEMENT_KINDS)
AnyPlacement = Task | Wait | Join | Scatter | Subflow | Phase | Terminal
