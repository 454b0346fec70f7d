"""Windows, escalation timers and node anchors: resolved when an attempt starts or a token parks,
released when a token leaves (decided in :mod:`flowtide.engine.run.windows`, applied here to the
run's view). A part the executor holds, made with exactly what it reads and how it commits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from flowtide.clock import Clock, isoformat
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import NodeStarted
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run import windows
from flowtide.engine.run.view import RunView
from flowtide.model.placements import (
    AnyPlacement,
)
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    NodeAnchor,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class Arming:
    """Arming a token at its placement, on ``view``: ``starting`` is the executor's set of
    tokens whose attempt start is being committed; ``commit`` commits one step (a scatter
    item's anchor)."""

    def __init__(
        self,
        view: RunView,
        plan: FlowPlan,
        clock: Clock,
        starting: set[str],
        commit: Callable[[Commit], Awaitable[bool]],
    ) -> None:
        self.view = view
        self.plan = plan
        self.clock = clock
        self.starting = starting
        self.commit = commit

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
            self.view.run.id,
            now,
            placement=placement,
            attempt=token.attempt,
            token_id=token.id,
        )
        return started, anchors, due

    def arm(
        self, token: TokenRecord, placement: str, settings: NodeSettings, now: datetime
    ) -> tuple[list[NodeAnchor], list[DueEntry]]:
        """Resolve the token's window (and timers) at an attempt's start or a park (see
        :func:`~flowtide.engine.run.windows.arm`): returns the node anchor to store (first
        arrival) and the timers' due entries."""
        armed = windows.arm(
            token,
            placement,
            settings,
            now=now,
            run_created_at=self.view.run.created_at,
            anchors=self.view.anchors,
        )
        armed.apply(token)
        if armed.anchor is None:
            return [], armed.due
        self.view.anchors[(placement, None)] = armed.anchor.at
        return [armed.anchor], armed.due

    def fixed_window_end(
        self, placement: str, settings: NodeSettings, now: datetime
    ) -> datetime | None:
        """See :func:`~flowtide.engine.run.windows.fixed_window_end`."""
        return windows.fixed_window_end(
            placement,
            settings,
            now=now,
            run_created_at=self.view.run.created_at,
            anchors=self.view.anchors,
        )

    async def item_anchor(self, placement: str, item: str) -> datetime:
        """The node anchor of one scatter item: stored on the item's first arrival."""
        key = (placement, item)
        found = self.view.anchors.get(key)
        if found is None:
            found = self.view.anchors[key] = self.clock.now()
            await self.commit(
                Commit(
                    self.view.run.id, anchors=[NodeAnchor(self.view.run.id, placement, item, found)]
                )
            )
        return found

    def releases(
        self, token: TokenRecord, p: AnyPlacement, output: str, targets: Sequence[str]
    ) -> list[tuple[str, str | None]]:
        """Node anchors released by moving ``token`` from ``p`` along ``output``."""
        return windows.releases(
            self.plan, self.view.anchors, self.view.tokens.values(), token, p, output, targets
        )
