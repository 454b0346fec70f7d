"""What a move along an output comes to, decided on the run's view without I/O: where it goes,
which moved tokens end at once at a terminal, which arrive at a join, and which start their next
attempt in the move's own commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.joins import JoinGroups, open_splits, out_of_reach
from flowtide.model.placements import AnyPlacement, Terminal
from flowtide.store.base import TokenRecord


def targets_of(p: AnyPlacement, output: str) -> Sequence[str]:
    """Where ``output`` of ``p`` goes (empty: nowhere, the run fails)."""
    return p.route_map().get(output) or ()


def ending(
    plan: FlowPlan, groups: JoinGroups, moved: Sequence[TokenRecord]
) -> list[tuple[TokenRecord, Terminal]]:
    """The moved tokens that end at once at a terminal that does not fail the run (its
    ``terminal_reached`` goes with the move's commit); none while a join group is open (a join
    may still count the token)."""
    if groups:
        return []
    out: list[tuple[TokenRecord, Terminal]] = []
    for t in moved:
        q = plan.placements[t.placement]
        if isinstance(q, Terminal) and not q.fails:
            out.append((t, q))
    return out


def arriving(plan: FlowPlan, moved: Sequence[TokenRecord]) -> list[TokenRecord]:
    """The moved tokens that arrive at a join in the move's own commit: each at a join that
    is on a split's branch (a token of no split passes a join by a step of its own)."""
    placements = plan.placements
    return [t for t in moved if t.lineage and placements[t.placement].kind == "join"]


def starting(
    plan: FlowPlan, groups: JoinGroups, moved: Sequence[TokenRecord], split: str | None
) -> list[TokenRecord]:
    """The moved tokens whose next attempt may start in the move's own commit: each that
    arrives at a task where no open join group can act on it (but those of ``split``, the split
    the move made, whose fresh groups cannot fire by it)."""
    splits = open_splits(groups, split)
    placements = plan.placements
    return [t for t in moved if placements[t.placement].kind == "task" and out_of_reach(t, splits)]
