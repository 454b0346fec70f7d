"""What a node returns: an output name, or an :class:`Output` with a state update."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Output:
    """The output a node takes, and top-level state keys it sets (merged by the flow's reducers).

    ``return Output("approved", update={"score": 0.93})`` is the same as setting
    ``ctx.state["score"] = 0.93`` and returning ``"approved"``.
    """

    name: str
    update: Mapping[str, Any] = field(default_factory=dict)
