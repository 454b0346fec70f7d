"""What a node returns: an output name, an :class:`Output` with a state update, or :class:`Park`."""

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


@dataclass(frozen=True, slots=True)
class Park:
    """A park request: the token waits on the outside world, holding no worker and no coroutine.

    ``key`` is an optional correlation key a signal may address the token by
    (``engine.signal(key=...)``); ``payload`` is anything the outside world needs (shown in
    ``RunResult.parked``). Changes the node made to ``ctx.state`` are committed with the park.
    A signal then either names the output to take, or wakes the node, which runs again (with
    ``ctx.signal`` set to the signal's payload) and decides. A node of a loaded document parks
    the same way by returning the reserved output ``parked`` (its key: state ``correlation_key``).
    """

    key: str | None = None
    payload: Any = None
