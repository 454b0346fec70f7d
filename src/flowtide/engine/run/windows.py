"""Windows, escalation timers and node anchors, decided on a run's view without I/O: what a
token's window and timers are when an attempt starts or it parks, where a window ends when it
does not move with each attempt, and which node anchors a move releases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.due import DuePurpose
from flowtide.engine.run.marks import arm_timers, fired_timers, set_window
from flowtide.engine.timing.deadlines import Window, needs_node_anchor, resolve_window, timer_due
from flowtide.model.placements import TIMEOUT_OUTPUT, AnyPlacement
from flowtide.model.settings import NodeSettings, TimeoutAnchor
from flowtide.store.base import DueEntry, NodeAnchor, TokenRecord

AnchorKey = tuple[str, str | None]
"""A node anchor: (placement, scatter item or None)."""
Anchors = Mapping[AnchorKey, datetime]
"""A run's stored node anchors: (placement, item) -> first arrival."""


@dataclass(frozen=True, slots=True)
class Armed:
    """A token's window and timers at an attempt's start or a park."""

    deadline: datetime | None = None
    window: Window | None = None
    timers: Mapping[int, datetime] | None = None
    """Index -> instant of the timers armed (None: the placement has none)."""
    anchor: NodeAnchor | None = None
    """The node anchor to store (the first arrival at the placement)."""
    due: list[DueEntry] = field(default_factory=list)
    """The timers' due entries."""

    def apply(self, token: TokenRecord) -> None:
        """Put the window and timers on ``token``."""
        token.deadline = self.deadline
        if self.window is not None:
            set_window(token, self.window)
        if self.timers is not None:
            arm_timers(token, self.timers)


UNARMED = Armed()


def arm(
    token: TokenRecord,
    placement: str,
    settings: NodeSettings,
    *,
    now: datetime,
    run_created_at: datetime,
    anchors: Anchors,
) -> Armed:
    """``token``'s window and timers at ``placement`` at ``now``. Timers that already fired
    during this visit are not armed again."""
    if settings.timeout is None and not settings.timers:
        return UNARMED  # the common case: no window, no timers
    anchor: NodeAnchor | None = None
    anchor_at: datetime | None = None
    if needs_node_anchor(settings):
        anchor_at = anchors.get((placement, None))
        if anchor_at is None:
            anchor_at = now
            anchor = NodeAnchor(token.run_id, placement, None, now)
    window = resolve_window(settings, now=now, run_created_at=run_created_at, node_anchor=anchor_at)
    if not settings.timers:
        kept = window if window.deadline is not None else None
        return Armed(window.deadline, kept, None, anchor)
    fired = fired_timers(token)
    armed: dict[int, datetime] = {}
    due: list[DueEntry] = []
    for i, timer in enumerate(settings.timers):
        if i in fired:
            continue
        when = timer_due(timer, now=now, run_created_at=run_created_at, node_anchor=anchor_at)
        armed[i] = when
        due.append(DuePurpose.timer(token.visit, i).entry(when, token.run_id, token.id))
    kept = window if window.deadline is not None else None
    return Armed(window.deadline, kept, armed, anchor, due)


def fixed_window_end(
    placement: str,
    settings: NodeSettings,
    *,
    now: datetime,
    run_created_at: datetime,
    anchors: Anchors,
) -> datetime | None:
    """The end of the placement's window when it does not move with each attempt (anchored
    at the run's start or at the first arrival); None for a ``park`` anchor or no timeout."""
    if settings.timeout is None or settings.anchor is TimeoutAnchor.PARK:
        return None
    return resolve_window(
        settings,
        now=now,
        run_created_at=run_created_at,
        node_anchor=anchors.get((placement, None)),
    ).deadline


def releases(
    plan: FlowPlan,
    anchors: Anchors,
    live: Iterable[TokenRecord],
    token: TokenRecord,
    p: AnyPlacement,
    output: str,
    targets: Sequence[str],
) -> list[AnchorKey]:
    """Node anchors released by moving ``token`` from ``p`` along ``output`` to ``targets``
    (``live``: the run's live tokens): its own when ``output`` is ``timeout`` or in the
    placement's ``release_on``, and each one whose loop no live token is in any more."""
    out: list[AnchorKey] = []
    settings = plan.settings.get(p.id)
    own = output == TIMEOUT_OUTPUT or (
        settings is not None and output in (settings.release_on or ())
    )
    others: list[TokenRecord] | None = None
    for key in anchors:
        anchored = key[0]
        if anchored == p.id and own:
            out.append(key)
            continue
        # Held while a live token is in the anchored placement's loop (at it, or at a
        # placement it shares a loop with); a token elsewhere that may come to it later
        # does not hold it: its visit is independent.
        if any(in_loop_of(plan, t, anchored) for t in targets):
            continue
        if others is None:
            others = [o for o in live if o is not token and o.status.live]
        if any(in_loop_of(plan, o.placement, anchored) for o in others):
            continue
        out.append(key)
    return out


def in_loop_of(plan: FlowPlan, placement: str, anchored: str) -> bool:
    """Whether a token at ``placement`` is in the loop of ``anchored`` (or at it)."""
    return placement == anchored or plan.same_loop(placement, anchored)
