"""A simulation script: what the outside world does to a run, and when, on a virtual clock.

A script is YAML or JSON::

    input: {order: 42}          # the run's initial state (default {})
    deadline: PT1H              # a deadline for the whole run (default: the flow's)
    nodes:                      # scripted outcomes of nodes, by placement id, in order
      collect-payment:
        - {after: PT2M, output: declined}   # takes 2 minutes, then returns 'declined'
        - {park: {key: pay-1}}              # parks, with a correlation key
        - {raise: gateway down}             # raises an error with this message
    signals:                    # signals at instants since the start (ISO 8601 durations)
      - {at: PT9M30S, placement: offer-retry, payload: {retry: true}}
      - {at: PT10M30S, key: pay-1, output: paid}
    until: P1D                  # when the clock stops if the run has not ended (default P30D)

:func:`parse_script` checks the data on its own (every mistake a :class:`Problem` located by a
JSON pointer into the script, ``/signals/2/at``); :func:`check_script` checks it against the
flows it is played on (the placements it names exist, the outputs it gives are declared).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from flowtide.documents.formats import Format, decode, parse_text
from flowtide.engine.state.limits import (
    DEFAULT_MAX_VALUE_BYTES,
    MAX_NESTING,
    ValueTooDeepError,
    ValueTooLargeError,
    check_size,
    check_sizes,
)
from flowtide.errors import FlowValidationError, Problem
from flowtide.jsonpointer import join
from flowtide.model.durations import (
    Duration,
    PositiveDuration,
    format_duration,
    parse_duration,
)
from flowtide.model.flow import Flow, node_ref
from flowtide.model.placements import RESERVED_OUTPUTS
from flowtide.store.jsonvalues import NotJSONError
from flowtide.validation.messages import sentence

__all__ = [
    "DEFAULT_RUN_ID",
    "DEFAULT_START",
    "DEFAULT_UNTIL",
    "NodeStep",
    "ParkStep",
    "Script",
    "ScriptedSignal",
    "check_script",
    "load_script",
    "parse_script",
]

T = TypeVar("T")

DEFAULT_START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
"""Where the virtual clock starts, unless the script says (``start``)."""
DEFAULT_UNTIL = timedelta(days=30)
"""How long the clock may run, unless the script says (``until``)."""
DEFAULT_RUN_ID = "sim"
"""The simulated run's id, unless the script says (``run_id``): fixed, so that keys a node makes
from it (``charge-sim-1``) can be named by the script's signals."""


def _json_values(value: Any) -> Any:
    """Refuse what JSON cannot carry (a YAML date, a set...): a run's state is JSON; and what a
    run may not keep (NaN, a lone surrogate, too deep a nesting), as the engine checks it."""
    return _within_limits(value, check_size)


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    """:func:`_json_values` of an object checked key by key, as the engine checks an input."""
    return _within_limits(value, check_sizes)


def _within_limits(value: T, check: Callable[[T, str, int], object]) -> T:
    deeper = f"more than {MAX_NESTING} levels deep"
    try:
        _check_json(value)
        check(value, "", DEFAULT_MAX_VALUE_BYTES)  # (the limit of the engine that plays it)
    except RecursionError:
        raise ValueError(f"the value nests lists and objects {deeper}") from None
    except NotJSONError as exc:
        raise ValueError(exc.reason + _at(exc.pointer)) from None
    except ValueTooDeepError as exc:
        levels = f"{exc.depth} levels deep" if exc.depth is not None else deeper
        raise ValueError(
            f"the value nests lists and objects {levels}, over the limit of {exc.limit}"
            + _at(exc.where)
        ) from None
    except ValueTooLargeError as exc:
        raise ValueError(
            f"the value is {exc.size:,} bytes as JSON, over the limit of {exc.limit:,}"
            + _at(exc.where)
        ) from None
    return value


def _at(pointer: str) -> str:
    return f" (at {pointer})" if pointer else ""


def _check_json(value: Any) -> None:
    if value is None or isinstance(value, str | bool | int | float):
        return
    if isinstance(value, list):
        for item in value:
            _check_json(item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"the key {key!r} must be text")
            _check_json(item)
        return
    what = "a date (quote it to keep it as text)" if isinstance(value, date) else repr(value)
    raise ValueError(f"only JSON values can go into a run's state, not {what}")


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]
JsonValue = Annotated[Any, AfterValidator(_json_values)]


class ParkStep(BaseModel):
    """``park: {key: pay-1, payload: {...}}``: the node parks (both optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str | None = Field(default=None, min_length=1)
    """The correlation key a signal may address the park by."""
    payload: JsonValue = None
    """What the node leaves for the outside world."""


class NodeStep(BaseModel):
    """One attempt of a scripted placement: after ``after`` (virtual time), it returns
    ``output``, parks (``park``) or raises (``raise``), having set the state keys of
    ``update``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    after: Duration | None = None
    output: str | None = Field(default=None, min_length=1)
    park: ParkStep | None = None
    raise_: str | None = Field(default=None, alias="raise")
    update: JsonObject | None = None

    @model_validator(mode="after")
    def _one_thing(self) -> NodeStep:
        given = [n for n, v in (("output", self.output), ("park", self.park)) if v is not None]
        if self.raise_ is not None:
            given.append("raise")
        if len(given) != 1:
            what = "none" if not given else " and ".join(given)
            raise ValueError(f"a step does one thing: output, park or raise (here: {what})")
        if self.update is not None and self.raise_ is not None:
            raise ValueError(
                "a step that raises changes nothing: 'update' goes with output or park"
            )
        return self


class ScriptedSignal(BaseModel):
    """A signal sent ``at`` that long after the run started, to the park at ``placement`` (in
    the run's own flow) or with correlation ``key`` (or both)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: Duration
    placement: str | None = Field(default=None, min_length=1)
    key: str | None = Field(default=None, min_length=1)
    payload: JsonObject | None = None
    output: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _addressed(self) -> ScriptedSignal:
        if self.placement is None and self.key is None:
            raise ValueError("a signal needs a 'placement' or a 'key' to address its park")
        return self


class Script(BaseModel):
    """A whole script (see the module's documentation)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: JsonObject = Field(default_factory=dict)
    start: AwareDatetime = DEFAULT_START
    run_id: str = Field(default=DEFAULT_RUN_ID, min_length=1)
    deadline: PositiveDuration | None = None
    nodes: dict[str, list[NodeStep]] = Field(default_factory=dict)
    signals: list[ScriptedSignal] = Field(default_factory=list)
    until: PositiveDuration = DEFAULT_UNTIL

    @field_validator("deadline", "until")
    @classmethod
    def _longer_than_zero(cls, v: timedelta | None) -> timedelta | None:
        if v is not None and v <= timedelta(0):
            raise ValueError(f"the duration must be longer than zero, not {format_duration(v)}")
        return v

    @field_validator("start")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return v.astimezone(UTC)

    def played(self) -> list[tuple[int, ScriptedSignal]]:
        """The signals with their index in the script, in the order they are sent: by instant,
        the script's order for one instant."""
        return sorted(enumerate(self.signals), key=lambda pair: pair[1].at)


# -- reading ------------------------------------------------------------------------------------

_TITLE = "invalid simulation script"


def parse_script(data: Any, source: str | None = None) -> Script:
    """The script in ``data`` (parsed YAML or JSON). Raises :class:`FlowValidationError` with
    one problem per mistake, each located by a JSON pointer into the script."""
    if not isinstance(data, Mapping):
        what = "empty" if data is None else f"a {type(data).__name__}"
        problem = Problem(f"a script is a mapping (input, nodes, signals...), not {what}")
        raise _invalid([problem], source)
    late = _late_signals(data)
    try:
        script = Script.model_validate(data)
    except ValidationError as exc:
        raise _invalid([*(_problem(err) for err in exc.errors()), *late], source) from None
    if late:
        raise _invalid(late, source)
    return script


def _late_signals(data: Mapping[str, Any]) -> list[Problem]:
    """A problem for each signal after ``until`` (from the data as given: told even when
    other parts of the script are wrong)."""
    signals = data.get("signals")
    try:
        until = parse_duration(data.get("until", DEFAULT_UNTIL))
    except ValueError:
        return []
    if not isinstance(signals, list):
        return []
    problems: list[Problem] = []
    for index, signal in enumerate(signals):
        try:
            at = parse_duration(signal["at"]) if isinstance(signal, Mapping) else None
        except (KeyError, ValueError):
            continue
        if at is not None and at > until:
            problems.append(
                Problem(
                    f"{format_duration(at)} is after 'until' ({format_duration(until)}): "
                    "the clock stops before it",
                    pointer=join("", "signals", index, "at"),
                )
            )
    return problems


def load_script(path: Path) -> Script:
    """The script in the file at ``path`` (JSON when it ends in ``.json``, else YAML)."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise _invalid([Problem(f"cannot read the script: {reason}")], source) from None
    fmt = Format.JSON if path.suffix.lower() == ".json" else Format.YAML
    try:
        data = parse_text(decode(raw, source), fmt, source)
    except FlowValidationError as exc:
        raise _invalid(exc.problems, source) from None
    return parse_script(data, source)


def _invalid(problems: Sequence[Problem], source: str | None = None) -> FlowValidationError:
    if source is not None:
        problems = [p.with_source(source) for p in problems]
        return FlowValidationError(problems, title=f"{source} is not a valid simulation script")
    return FlowValidationError(problems, title=_TITLE)


def _problem(err: ErrorDetails) -> Problem:
    loc = list(err["loc"])
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
    if err["type"] == "extra_forbidden":
        message = f"unknown field {str(loc[-1])!r} (fields: {', '.join(_fields(loc[:-1]))})"
    else:
        message = sentence(err, loc, None)
    return Problem(message, pointer=join("", *loc))


def _fields(loc: Sequence[object]) -> list[str]:
    """The fields of the part of a script at ``loc`` (as a script spells them)."""
    names = [str(p) for p in loc if isinstance(p, str)]
    model: type[BaseModel] = Script
    if names[:1] == ["nodes"]:
        model = ParkStep if names[-1:] == ["park"] else NodeStep
    elif names[:1] == ["signals"]:
        model = ScriptedSignal
    return [f.alias or name for name, f in model.model_fields.items()]


# -- against the flows --------------------------------------------------------------------------

Outputs = Callable[[Flow, str], tuple[str, ...] | None]
"""The outputs the node at a placement of a flow declares (None: not known)."""


def check_script(
    script: Script,
    flow: Flow,
    others: Sequence[Flow],
    outputs: Outputs,
    source: str | None = None,
) -> None:
    """Check ``script`` against the flow it plays (``flow``) and the flows its subflows run
    (``others``): each scripted placement runs a node in one of them, each output is one its
    node declares, and each signal's placement is one of ``flow``'s. Raises
    :class:`FlowValidationError` with every mistake, located in the script."""
    problems = [*_node_problems(script, [flow, *others], outputs)]
    problems += _signal_problems(script, flow, outputs)
    if problems:
        raise _invalid(problems, source)


def _node_problems(script: Script, flows: Sequence[Flow], outputs: Outputs) -> list[Problem]:
    problems: list[Problem] = []
    for placement, steps in script.nodes.items():
        at = join("", "nodes", placement)
        found = [f for f in flows if f.has_placement(placement)]
        if not found:
            names = ", ".join(f.id for f in flows)
            problems.append(Problem(f"no placement {placement!r} in {names}", pointer=at))
            continue
        runs = [f for f in found if node_ref(f.placement(placement)) is not None]
        if not runs:
            kind = found[0].placement(placement).kind
            problems.append(
                Problem(f"placement {placement!r} is a {kind}: it runs no node", pointer=at)
            )
            continue
        declared = _declared(runs, placement, outputs)
        if declared is None:
            ref = node_ref(runs[0].placement(placement))
            problems.append(
                Problem(
                    f"the outputs of node {ref!r} at {placement!r} are not known: it has no "
                    "implementation and the flow declares no node type for it",
                    pointer=at,
                )
            )
            continue
        for index, step in enumerate(steps):
            if step.output is not None and step.output not in declared:
                problems.append(
                    Problem(
                        _undeclared(step.output, placement, declared),
                        pointer=join(at, index, "output"),
                    )
                )
    return problems


def _declared(flows: Sequence[Flow], placement: str, outputs: Outputs) -> tuple[str, ...] | None:
    """The outputs the node at ``placement`` declares in every flow that has it."""
    known = [outputs(f, placement) for f in flows]
    if any(o is None for o in known):
        return None
    return tuple(name for o in known if o is not None for name in o if name not in RESERVED_OUTPUTS)


def _undeclared(output: str, placement: str, declared: Sequence[str]) -> str:
    return (
        f"the node at {placement!r} does not declare output {output!r} "
        f"(it declares: {', '.join(declared)})"
    )


def _signal_problems(script: Script, flow: Flow, outputs: Outputs) -> list[Problem]:
    problems: list[Problem] = []
    for index, signal in enumerate(script.signals):
        if signal.placement is None:
            continue
        if not flow.has_placement(signal.placement):
            problems.append(
                Problem(
                    f"no placement {signal.placement!r} in {flow.id} (a signal names a "
                    "placement of the run's own flow; a subflow's park is named by its key)",
                    pointer=join("", "signals", index, "placement"),
                )
            )
            continue
        declared = outputs(flow, signal.placement)
        if signal.output is not None and declared is not None and signal.output not in declared:
            problems.append(
                Problem(
                    _undeclared(signal.output, signal.placement, declared),
                    pointer=join("", "signals", index, "output"),
                )
            )
    return problems
