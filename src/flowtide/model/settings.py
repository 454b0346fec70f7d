"""Node settings: timeout, timeout anchor, release outputs, escalation timers and retry.

A node implementation declares defaults; a placement may override any of them. A field left
``None`` means "not set here": :meth:`NodeSettings.overlay` lets the placement's set fields win over
the node's. :func:`flowtide.model.schemas.node_settings_schema` is their one JSON Schema.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flowtide.model.durations import Duration, PositiveDuration
from flowtide.model.scalars import Count, Flag, Number


class TimeoutAnchor(StrEnum):
    """What a node's timeout window is measured from."""

    PARK = "park"
    """Each arrival, park and retry attempt: the window is rearmed every time (the default)."""
    INSTANCE = "instance"
    """The run's creation: one budget for the whole run."""
    NODE = "node"
    """The first arrival at this placement, kept across loop re-entries and retries."""


class Backoff(StrEnum):
    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"
    DECORRELATED_JITTER = "decorrelated_jitter"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


def _positive(value: timedelta | None, what: str) -> timedelta | None:
    if value is not None and value <= timedelta(0):
        raise ValueError(f"{what} must be greater than zero")
    return value


class Timer(_Frozen):
    """One rung of an escalation ladder: fires once, ``after`` the anchor."""

    after: PositiveDuration = Field(description="How long after the anchor the timer fires.")
    output: str = Field(min_length=1, description="The output the timer takes when it fires.")
    interrupting: Flag = Field(
        default=False,
        description="True: the token leaves the node like a timeout. False: a new token starts "
        "on the output and the node keeps waiting.",
    )
    anchor: TimeoutAnchor = Field(
        default=TimeoutAnchor.PARK, description="What 'after' is measured from."
    )

    @field_validator("after")
    @classmethod
    def _after_positive(cls, v: timedelta) -> timedelta:
        _positive(v, "a timer's 'after'")
        return v


class RetryPolicy(_Frozen):
    """Retries of a failed attempt, with backoff waits kept as due instants."""

    max_attempts: Count = Field(default=3, description="Attempts in all, the first included.")
    backoff: Backoff = Field(default=Backoff.EXPONENTIAL)
    initial: Duration = Field(default=timedelta(seconds=1), description="The first wait.")
    max: PositiveDuration | None = Field(
        default=timedelta(minutes=5), description="No wait is longer."
    )
    factor: Number = Field(default=2.0, gt=0, description="Growth factor (exponential, jitter).")
    retry_on: tuple[str, ...] = Field(
        default=(),
        description="Exception type names that are retried (empty: every Exception). A name "
        "matches the class or any base class, by plain name or 'module.Name'.",
    )

    @field_validator("max")
    @classmethod
    def _max_positive(cls, v: timedelta | None) -> timedelta | None:
        return _positive(v, "'max'")

    @model_validator(mode="after")
    def _max_not_below_initial(self) -> RetryPolicy:
        if self.max is not None and self.max < self.initial:
            raise ValueError("'max' must not be less than 'initial'")
        return self


class NodeSettings(_Frozen):
    """Settings of a node, every field optional so a placement can override only some."""

    timeout: PositiveDuration | None = Field(
        default=None,
        description="How long the node may take, measured from its anchor: then the placement "
        "takes its 'timeout' output, or the run fails if it routes none. Unset: no timeout.",
    )
    timeout_anchor: TimeoutAnchor | None = Field(
        default=None, description="What the window is measured from; 'park' when unset."
    )
    release_on: tuple[str, ...] | None = Field(
        default=None,
        description="Outputs that release a 'node' anchor: a later visit starts a fresh window.",
    )
    timers: tuple[Timer, ...] | None = Field(default=None, description="Escalation ladder.")
    retry: RetryPolicy | None = Field(default=None, description="Retries of failed attempts.")

    @field_validator("timeout")
    @classmethod
    def _timeout_positive(cls, v: timedelta | None) -> timedelta | None:
        return _positive(v, "a timeout")

    def overlay(self, override: NodeSettings | None) -> NodeSettings:
        """These settings with every field that ``override`` sets replaced by its value."""
        if override is None:
            return self
        update = {
            name: value
            for name in override.model_fields_set
            if (value := getattr(override, name)) is not None
        }
        return self.model_copy(update=update)

    @property
    def anchor(self) -> TimeoutAnchor:
        """The effective anchor (``park`` when unset)."""
        return self.timeout_anchor or TimeoutAnchor.PARK

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)
