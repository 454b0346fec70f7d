"""Windows, escalation timers and node anchors: resolved when an attempt starts or a token parks,
released when a token leaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowtide.clock import isoformat
from flowtide.engine._attempts import Attempts
from flowtide.engine.deadlines import (
    needs_node_anchor,
    resolve_window,
    timer_due,
)
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import NodeStarted
from flowtide.engine.run.due import DuePurpose
from flowtide.engine.run.marks import arm_timers, fired_timers, set_window
from flowtide.model.placements import (
    TIMEOUT_OUTPUT,
    AnyPlacement,
)
from flowtide.model.settings import NodeSettings, TimeoutAnchor
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    NodeAnchor,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class Arming(Attempts):
    """Arming a token at its placement."""

    def start_attempt(
        self, token: TokenRecord, placement: str, node: str, settings: NodeSettings
    ) -> tuple[EventRecord, list[NodeAnchor], list[DueEntry]]:
        """Mark ``token`` running an attempt at ``placement``: its window and timers armed, its
        ``node_started`` event (what the attempt's start commit carries)."""
        token.status = S.RUNNING
        self.starting.add(token.id)
        now = self.clock.now()
        if placement in self.plan.unarmed:
            token.deadline = None  # the common case: no window, no timers
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            when = None
        else:
            anchors, due = self.arm(token, placement, settings, now)
            deadline = token.deadline
            when = isoformat(deadline) if deadline is not None else None
        started = event_record(
            NodeStarted(visit=token.visit, kind="task", deadline=when, node=node),
            self.run.id,
            now,
            placement=placement,
            attempt=token.attempt,
            token_id=token.id,
        )
        return started, anchors, due

    def arm(
        self, token: TokenRecord, placement: str, settings: NodeSettings, now: datetime
    ) -> tuple[list[NodeAnchor], list[DueEntry]]:
        """Resolve the token's window (and timers) at an attempt's start or a park.

        Returns the node anchor to store (first arrival) and the timers' due entries. Timers
        that already fired during this visit are not armed again.
        """
        if settings.timeout is None and not settings.timers:
            token.deadline = None  # the common case: no window, no timers
            return [], []
        new: list[NodeAnchor] = []
        anchor_at: datetime | None = None
        if needs_node_anchor(settings):
            anchor_at = self.anchors.get((placement, None))
            if anchor_at is None:
                anchor_at = self.anchors[(placement, None)] = now
                new.append(NodeAnchor(self.run.id, placement, None, now))
        window = resolve_window(
            settings, now=now, run_created_at=self.run.created_at, node_anchor=anchor_at
        )
        token.deadline = window.deadline
        if window.deadline is not None:
            set_window(token, window)
        due: list[DueEntry] = []
        if settings.timers:
            fired = fired_timers(token)
            armed: dict[int, datetime] = {}
            for i, timer in enumerate(settings.timers):
                if i in fired:
                    continue
                when = timer_due(
                    timer, now=now, run_created_at=self.run.created_at, node_anchor=anchor_at
                )
                armed[i] = when
                due.append(DuePurpose.timer(token.visit, i).entry(when, self.run.id, token.id))
            arm_timers(token, armed)
        return new, due

    def fixed_window_end(
        self, placement: str, settings: NodeSettings, now: datetime
    ) -> datetime | None:
        """The end of the placement's window when it does not move with each attempt (anchored
        at the run's start or at the first arrival); None for a ``park`` anchor or no timeout."""
        if settings.timeout is None or settings.anchor is TimeoutAnchor.PARK:
            return None
        return resolve_window(
            settings,
            now=now,
            run_created_at=self.run.created_at,
            node_anchor=self.anchors.get((placement, None)),
        ).deadline

    async def item_anchor(self, placement: str, item: str) -> datetime:
        """The node anchor of one scatter item: stored on the item's first arrival."""
        key = (placement, item)
        found = self.anchors.get(key)
        if found is None:
            found = self.anchors[key] = self.clock.now()
            await self.commit(
                Commit(self.run.id, anchors=[NodeAnchor(self.run.id, placement, item, found)])
            )
        return found

    def in_loop_of(self, placement: str, anchored: str) -> bool:
        """Whether a token at ``placement`` is in the loop of ``anchored`` (or at it)."""
        return placement == anchored or self.plan.same_loop(placement, anchored)

    def releases(
        self, token: TokenRecord, p: AnyPlacement, output: str, targets: Sequence[str]
    ) -> list[tuple[str, str | None]]:
        """Node anchors released by moving ``token`` from ``p`` along ``output``."""
        out: list[tuple[str, str | None]] = []
        settings = self.plan.settings.get(p.id)
        own = output == TIMEOUT_OUTPUT or (
            settings is not None and output in (settings.release_on or ())
        )
        for key in self.anchors:
            anchored = key[0]
            if anchored == p.id and own:
                out.append(key)
                continue
            # Held while a live token is in the anchored placement's loop (at it, or at a
            # placement it shares a loop with); a token elsewhere that may come to it later
            # does not hold it: its visit is independent.
            if any(self.in_loop_of(t, anchored) for t in targets):
                continue
            if any(
                o is not token and o.status.live and self.in_loop_of(o.placement, anchored)
                for o in self.tokens.values()
            ):
                continue
            out.append(key)
        return out
