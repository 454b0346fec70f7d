"""A run's view rebuilt from what the store has of it (its record's resume checkpoint, the
history after it, its tokens), without I/O: what a rebuilt executor goes on from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowtide.engine.events import EventKind
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.joins import restore_groups
from flowtide.engine.run.marks import sets_outcome
from flowtide.engine.run.view import RunView
from flowtide.store.base import EventRecord, TokenRecord


@dataclass(frozen=True, slots=True)
class Restored:
    """What rebuilding a view found beyond the view itself."""

    seq: int
    """The seq of the run's last history event."""
    next_id: int
    """The number the run's next token takes (after the highest stored one)."""


def restore_view(
    view: RunView,
    plan: FlowPlan,
    tokens: Sequence[TokenRecord],
    history: Sequence[EventRecord],
) -> Restored:
    """Fill ``view`` (fresh, of a stored run) from its stored ``tokens`` and ``history`` (what
    follows the run's resume checkpoint; all of it without one): visits, terminals, outcome,
    live tokens and join groups."""
    seq = 0
    checkpoint = view.run.checkpoint
    if checkpoint is not None:
        seq = checkpoint.seq
        view.visits.update(checkpoint.visits)
        view.terminals.extend(checkpoint.terminals)
        view.outcome = checkpoint.outcome
    if history:
        seq = history[-1].seq
    visits = view.visits
    # (A terminal reached by a reminder's branch does not set the outcome.)
    side = {t.id for t in tokens if not sets_outcome(t)}
    for e in history:
        if e.kind == EventKind.NODE_STARTED and e.placement is not None:
            visit = e.data.get("visit")
            if isinstance(visit, int):
                visits[e.placement] = max(visits.get(e.placement, 0), visit)
        if e.kind == EventKind.TERMINAL_REACHED and e.placement is not None:
            view.terminals.append(e.placement)
            if (
                view.outcome is None
                and e.data.get("outcome") != "failed"
                and e.token_id not in side
            ):
                view.outcome = e.data.get("outcome")
    top = 0
    for t in tokens:
        suffix = t.id.rpartition(".")[2]
        if suffix.isdigit():
            top = max(top, int(suffix))
        if not t.status.live:
            continue
        view.tokens[t.id] = t
        visits[t.placement] = max(visits.get(t.placement, 0), t.visit)
    restore_groups(view.joins, plan, view.tokens.values())
    return Restored(seq, top + 1)
