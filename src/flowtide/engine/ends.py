"""The results of the runs that ended here last, so that ``Engine.wait`` answers them without a
store read: :class:`RecentEnds`.

A result is kept packed when it can be: a tuple of plain values with the state pickled to bytes.
The collector stops tracking such a tuple at its first young collection, so keeping thousands of
recent ends costs it nothing. A kept :class:`RunResult` (an
instance with slots, whose state dict is tracked as well) would survive into the oldest
generation, and CPython starts a full collection once those survivors reach a quarter of what
that generation holds: with the rest of the heap quiet (a store whose rows are untracked), every
few thousand ends would cost a full collection, a pause of tens of milliseconds for everything
on the loop, sweeper included.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import RunResult, run_result

__all__ = ["RecentEnds"]

_Packed = tuple[str, str | None, bytes]
"""(lifecycle, outcome, (state, terminals) packed) of a result with nothing else to say:
plain values only, which the collector does not track (a tuple of terminals kept as it is may
still be tracked, and so keep the packed tuple tracked)."""


class RecentEnds:
    """The last ``limit`` results recorded, by run id; the oldest is dropped first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Ordered: dropping the oldest of a plain dict walks past every slot deleted before it.
        self._kept: OrderedDict[str, RunResult | _Packed] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def run_ids(self) -> list[str]:
        """The run ids kept, oldest first."""
        return list(self._kept)

    def add(self, result: RunResult) -> None:
        kept = self._kept
        kept[result.run_id] = _pack(result)
        if len(kept) > self.limit:
            kept.popitem(last=False)

    def get(self, run_id: str) -> RunResult | None:
        """The result recorded for ``run_id``, or None; one that was kept packed is rebuilt,
        equal to the one recorded, with a state dict of its own."""
        kept = self._kept.get(run_id)
        if kept is None or isinstance(kept, RunResult):
            return kept
        lifecycle, outcome, packed = kept
        state, terminals = pickle.loads(packed)
        return run_result(run_id, Lifecycle(lifecycle), outcome, state, terminals=terminals)


def _pack(result: RunResult) -> RunResult | _Packed:
    """``result`` packed, or as it is when it has errors, an interruption, parked tokens or
    warnings (rare: kept as they are) or a state that pickle refuses."""
    if result.errors or result.interrupted_at or result.parked or result.warnings:
        return result
    try:
        packed = pickle.dumps((result.state, result.terminals), pickle.HIGHEST_PROTOCOL)
    except Exception:  # whatever a value's own pickling raises: kept as it is
        return result
    return (result.lifecycle._value_, result.outcome, packed)
