"""Placements: a node's position in a flow, one class per kind.

A placement's ``routes`` map each output to the placement(s) it leads to; an output that routes to
several placements is a parallel split. Which outputs a kind can take is fixed here
(:meth:`Placement.fixed_outputs`) or, for tasks, comes from the node implementation.
"""

from __future__ import annotations

import re
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
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from flowtide.model.durations import Duration, PositiveDuration
from flowtide.model.scalars import Count, Number, add_rules, exactly_one, not_both, when
from flowtide.model.settings import NodeSettings

TIMEOUT_OUTPUT = "timeout"
"""The output a placement takes when its timeout window ends, if the placement routes it."""
PARKED_OUTPUT = "parked"
"""The reserved output by which a node of a loaded document parks."""
RESERVED_OUTPUTS = frozenset({TIMEOUT_OUTPUT, PARKED_OUTPUT})

Instant = Annotated[
    datetime,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:?\d\d)$",
            "examples": ["2026-01-01T00:00:00Z", "2026-01-01T09:30:00+05:30"],
            "description": "An instant with a time zone (ISO 8601 / RFC 3339).",
        }
    ),
]
"""An instant with a time zone, written as ISO 8601 text (as Python reads it: seconds may be
left out, and a space may stand for the ``T``)."""

_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


def _targets(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    return value


def _dump_targets(value: tuple[str, ...]) -> str | list[str]:
    return value[0] if len(value) == 1 else list(value)


_PLACEMENT_ID: JsonDict = {"type": "string", "minLength": 1}

Targets = Annotated[
    tuple[str, ...],
    BeforeValidator(_targets),
    PlainSerializer(_dump_targets),
    Field(min_length=1),
    WithJsonSchema(
        {
            "anyOf": [
                _PLACEMENT_ID,
                {"type": "array", "items": _PLACEMENT_ID, "minItems": 1},
            ],
            "description": "The id of the placement this output leads to, or a list of ids "
            "(a parallel split).",
        }
    ),
]
"""Where one output leads: one placement id, or several (a parallel split)."""

Routes = dict[str, Targets]


def _placement_schema(schema: JsonDict, cls: type[Any]) -> None:
    """A placement's JSON Schema: ``kind`` is required (it says which placement it is), the
    outputs every placement of the kind has are named in its routes (so an editor offers them),
    and the rules of the kind's validators across its fields are added."""
    required = schema.get("required")
    others = [name for name in required if name != "kind"] if isinstance(required, list) else []
    schema["required"] = ["kind", *others]
    properties: Any = schema.get("properties")
    routes = properties.get("routes") if isinstance(properties, dict) else None
    outputs = [*cls.fixed_outputs, *([TIMEOUT_OUTPUT] if cls.has_settings else [])]
    if isinstance(routes, dict) and cls.fixed_outputs:
        routes["properties"] = dict.fromkeys(outputs, routes["additionalProperties"])
        if not cls.has_settings:  # no timers either: these outputs are all there are
            routes["additionalProperties"] = False
    add_rules(schema, *cls.schema_rules)


class _Placement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_placement_schema)

    kind: str
    id: str = Field(min_length=1, description="The placement's id, unique in its flow.")
    name: str | None = Field(default=None, description="A display label.")
    description: str | None = None

    #: Outputs every placement of this kind can take, whatever its node.
    fixed_outputs: ClassVar[tuple[str, ...]] = ()
    #: Whether the kind accepts node settings (timeout, retry, timers…).
    has_settings: ClassVar[bool] = False
    #: What the kind's validators check across fields, as JSON Schema rules.
    schema_rules: ClassVar[tuple[JsonDict, ...]] = ()

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
    node: str = Field(
        min_length=1,
        description="The node, by the id it is registered under: an IRI or 'module:qualname'.",
    )
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    has_settings: ClassVar[bool] = True


class Wait(_Placement):
    """A durable timer: waits ``duration`` after arrival, or until ``until``; routes ``elapsed``."""

    kind: Literal["wait"] = "wait"
    duration: PositiveDuration | None = Field(default=None, description="How long to wait.")
    until: Instant | None = Field(default=None, description="The instant to wait for.")
    routes: Routes = Field(default_factory=dict)
    fixed_outputs: ClassVar[tuple[str, ...]] = ("elapsed",)
    schema_rules: ClassVar[tuple[JsonDict, ...]] = (exactly_one("duration", "until"),)

    @field_validator("until", mode="before")
    @classmethod
    def _instant_text(cls, v: Any) -> Any:
        # Python would read a number (or number-like text) as seconds since 1970.
        if isinstance(v, int | float) or (isinstance(v, str) and _NUMBER.match(v)):
            raise ValueError(
                "'until' must be an instant with a time zone (such as "
                f"'2026-01-01T00:00:00Z'), not {v!r}"
            )
        return v

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
    quorum: Count | None = Field(
        default=None, description="How many branches must arrive (mode 'quorum')."
    )
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    fixed_outputs: ClassVar[tuple[str, ...]] = ("success", "error", "empty")
    has_settings: ClassVar[bool] = True
    schema_rules: ClassVar[tuple[JsonDict, ...]] = (
        when(
            "mode",
            JoinMode.QUORUM.value,
            then={"required": ["quorum"], "properties": {"quorum": {"type": "integer"}}},
            otherwise={"properties": {"quorum": {"type": "null"}}},
        ),
    )

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


_TEXT: JsonDict = {"type": "string", "minLength": 1}


class Gather(BaseModel):
    """How a scatter puts its items' results back into the parent's state."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_extra={
            "allOf": [
                when("strategy", "map", then={"required": ["key"], "properties": {"key": _TEXT}}),
                when(
                    "strategy",
                    "reduce",
                    then={"required": ["reducer"], "properties": {"reducer": _TEXT}},
                ),
            ]
        },
    )

    strategy: GatherStrategy = GatherStrategy.APPEND
    target: str = Field(default="results", min_length=1, description="State path written.")
    field: str | None = Field(
        default=None, description="Path in each item's final state to take (default: all of it)."
    )
    key: str | None = Field(default=None, description="Item path used as the key ('map').")
    reducer: str | None = Field(
        default=None,
        description="The id of a registered reducer (@flowtide.reducer, 'module:function') "
        "folding (accumulator, result) ('reduce').",
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
    size: Count = Field(default=100, description="A batch is released when it has this many.")
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

    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_extra={"allOf": [exactly_one("node", "flow")]}
    )

    node: str | None = Field(default=None, description="The node run for each item.")
    flow: str | None = Field(default=None, description="The id of the flow run for each item.")

    @model_validator(mode="after")
    def _one(self) -> Body:
        if (self.node is None) == (self.flow is None):
            raise ValueError("a scatter body needs exactly one of 'node' and 'flow'")
        return self


_IDENTIFIER = r"[^\W\d]\w*"
FUNCTION_REF_PATTERN = rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}(\.{_IDENTIFIER})*$"
"""``module:function``: a dotted module, a colon, a dotted attribute."""


def _is_function_ref(ref: str) -> bool:
    """Whether ``ref`` reads as ``module:function`` (a dotted module, a dotted attribute)."""
    module, sep, attr = ref.partition(":")
    return bool(sep) and all(part.isidentifier() for part in (*module.split("."), *attr.split(".")))


class Scatter(_Placement):
    """Runs ``body`` once per item, then gathers the results.

    The items come from exactly one of ``source`` (the state path of a JSON collection) and
    ``source_fn`` (a registered source function's id, ``module:function`` in form, called when
    the scatter starts, giving the items
    lazily: an iterable or an async iterable of JSON items; see :mod:`flowtide.engine.run.scatter`).
    """

    kind: Literal["scatter"] = "scatter"
    source: str | None = Field(
        default=None, min_length=1, description="State path of the collection of items."
    )
    source_fn: str | None = Field(
        default=None,
        min_length=1,
        json_schema_extra={"pattern": FUNCTION_REF_PATTERN},
        description="The id of a registered source function (@flowtide.source, "
        "'module:function') giving the items instead of 'source': called with a "
        "read-only view of the run state, it returns an iterable or an async iterable of JSON "
        "items, pulled one at a time; it must give the same items in the same order when called "
        "again (a resumed scatter skips finished items by index).",
    )
    item_key: str = Field(default="item", min_length=1, description="Where each item is put.")
    body: Body
    input: dict[str, str] = Field(
        default_factory=dict, description="Item state path <- parent state path."
    )
    concurrency: Count = Field(default=1, description="Items run at once.")
    throttle: Number | None = Field(default=None, gt=0, description="Items started per second.")
    batch: KeyedBatches | None = None
    gather: Gather = Field(default_factory=Gather)
    on_failure: FailurePolicy = FailurePolicy.CONTINUE
    routes: Routes = Field(default_factory=dict)
    settings: NodeSettings | None = None
    fixed_outputs: ClassVar[tuple[str, ...]] = ("all-success", "partial", "all-error", "empty")
    has_settings: ClassVar[bool] = True
    schema_rules: ClassVar[tuple[JsonDict, ...]] = (
        exactly_one("source", "source_fn"),
        not_both("throttle", "batch"),
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
