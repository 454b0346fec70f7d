"""A run as its executor sees it: data only (no I/O, no tasks), what the decision parts read and
the executor changes, step by step, as its commits go through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ErrorInfo, InterruptedAt
from flowtide.engine.run.joins import JoinGroups
from flowtide.engine.run.windows import AnchorKey
from flowtide.store.base import ParkRecord, RunRecord, TokenRecord


@dataclass(slots=True)
class RunEnd:
    """How the run ends, once decided (its end is then committed)."""

    lifecycle: Lifecycle
    errors: list[ErrorInfo]
    interrupted: InterruptedAt | None


@dataclass(slots=True)
class RunView:
    """One run's record, state and live tokens, with their parks, anchors, visits and joins."""

    run: RunRecord
    state: dict[str, Any]
    tokens: dict[str, TokenRecord] = field(default_factory=dict)
    """Live tokens by id."""
    parks: dict[str, ParkRecord] = field(default_factory=dict)
    """Open parks by token id."""
    recent_parks: dict[str, ParkRecord] = field(default_factory=dict)
    """Parks closed by this executor, by park id (to tell a late signal why it is refused)."""
    anchors: dict[AnchorKey, datetime] = field(default_factory=dict)
    """Stored node anchors: (placement, item) -> first arrival."""
    visits: dict[str, int] = field(default_factory=dict)
    """Placement -> its last visit."""
    joins: JoinGroups = field(default_factory=dict)
    """Open join groups."""
    end: RunEnd | None = None
    """How the run ends, once decided."""
    outcome: str | None = None
    """The outcome of the first terminal the run's own branches reached."""
    terminals: list[str] = field(default_factory=list)
    """The terminals reached, in order."""
    warnings: list[str] = field(default_factory=list)
    last_placements: list[str] = field(default_factory=list)
    """Where the run's last moves left from (what a run that ends without a terminal names)."""
