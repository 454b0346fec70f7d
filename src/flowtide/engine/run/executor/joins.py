"""Joins: branches of a split arrive, and a join fires success, error or empty; a first or quorum
join cancels the losers. What fires and whom it cancels is decided in
:mod:`flowtide.engine.run.joins`; this layer commits and applies it.
"""

from __future__ import annotations

from flowtide.engine.event_types import JoinFired, TokenCancelled
from flowtide.engine.run.executor.routing import Routing
from flowtide.engine.run.joins import (
    JoinFiring,
    arrive,
    arrived_branches,
    close_split,
    losers,
    next_firing,
    note_moves,
)
from flowtide.engine.scope import CancelReason
from flowtide.model.placements import Join
from flowtide.store.base import (
    Commit,
    ParkStatus,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class Joins(Routing):
    """Join groups."""

    async def at_join(self, token: TokenRecord, p: Join) -> TokenRecord | None:
        if not token.lineage:
            return (
                await self.move(
                    token,
                    p,
                    "success",
                    event=lambda to: JoinFired(output="success", arrived=1, branches=[], to=to),
                )
            ).next
        ev = self.event(token, arrive(self.view.joins, token, p.id))
        if not await self.commit(
            Commit(self.view.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        await self.evaluate_joins()
        return None

    async def evaluate_joins(self) -> None:
        """Fire the join groups that fire now, one after another, while the run goes on."""
        while self.view.end is None:
            firing = next_firing(self.view.joins, self.plan, self.view.tokens)
            if firing is None:
                return
            await self.fire_join(firing)

    async def fire_join(self, firing: JoinFiring) -> None:
        group, p, output = firing.group, firing.join, firing.output
        close_split(self.view.joins, group.split)
        arrived = group.arrived
        if not arrived:
            # No branch arrived, and none can any more: a token leaves the join by ``empty``.
            arrived = [self.new_token(p.id, group.lineage)]
        cancelled = losers(firing, self.view.tokens)
        extra_events = []
        for t in cancelled:
            self.kill(t, CancelReason.JOIN_LOSER)
            extra_events.append(
                self.event(t, TokenCancelled(reason=CancelReason.JOIN_LOSER.value, join=p.id))
            )
        came = group.arrived
        # Read before the joined token leaves the split (else its own branch reads as -1).
        arrived_count, branches = len(came), arrived_branches(came, group.split)
        first = arrived[0]
        for t in arrived[1:]:
            t.status = S.DONE
            self.view.tokens.pop(t.id, None)
        cont = first
        cont.lineage = tuple(f for f in cont.lineage if f[0] != group.split)
        moved = await self.move(
            cont,
            p,
            output,
            event=lambda to: JoinFired(
                output=output, arrived=arrived_count, branches=branches, to=to
            ),
            extra=[*arrived[1:], *cancelled],
            extra_events=extra_events,
            due_cleared=[t.id for t in cancelled],
        )
        if moved.next is not None:
            self.spawn(moved.next)

    def kill(self, t: TokenRecord, reason: CancelReason) -> None:
        """Cancel a live token: its running code (if any) and its pending due instant."""
        t.status = S.CANCELLED
        t.due = None
        t.epoch += 1
        self.close_park(t, ParkStatus.CANCELLED, reason.value)
        self.view.tokens.pop(t.id, None)
        note_moves(self.view.joins, self.plan, [t], ended=True)
        running = self.running.get(t.id)
        if running is not None:
            running[1].cancel(reason, self.clock.now())
        for key, (_, scope) in list(self.running.items()):
            if key.startswith(t.id + "/"):
                scope.cancel(reason, self.clock.now())
