"""Joins: branches of a split arrive, and a join fires success, error or empty; a first or quorum
join cancels the losers.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.engine._records import JoinGroup, arrived_branches, first_branch
from flowtide.engine._routing import Routing
from flowtide.engine.event_types import JoinArrived, JoinFired, TokenCancelled
from flowtide.engine.scope import CancelReason
from flowtide.model.placements import (
    Join,
    JoinMode,
)
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
            return await self.route(
                token,
                p,
                "success",
                event=lambda to: JoinFired(output="success", arrived=1, branches=[], to=to),
            )
        ev = self.event(token, self.arrive(token, p.id))
        if not await self.commit(
            Commit(self.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        await self.evaluate_joins()
        return None

    def arrive(self, token: TokenRecord, join: str) -> JoinArrived:
        """Count ``token`` (with a lineage) as arrived at ``join`` in its innermost split's group;
        returns the ``join_arrived`` event's payload."""
        split, branch, count = token.lineage[-1]
        group = self.joins.get((join, split))
        if group is None:
            group = self.joins[(join, split)] = JoinGroup(join, split, count)
        token.status = S.ARRIVED
        group.arrived.append(token)
        group.branches.add(branch)
        return JoinArrived(split=split, branch=branch)

    def expect_joins(
        self,
        split: str,
        count: int,
        lineage: tuple[tuple[str, int, int], ...],
        placements: Sequence[str],
    ) -> None:
        """Open an (empty) join group for every join the branches of ``split`` may arrive at,
        so that a join none of them reaches routes ``empty`` once none can arrive any more."""
        for join in self.plan.joins_of(placements):
            if (join, split) not in self.joins:
                self.joins[(join, split)] = JoinGroup(
                    join, split, count, dirty=False, lineage=lineage
                )

    def note_moves(self, tokens: Sequence[TokenRecord], ended: bool = False) -> bool:
        """Mark join groups that may have lost a branch through these tokens; True if any."""
        hit = False
        for group in self.joins.values():
            if group.fired:
                continue
            for t in tokens:
                if first_branch(t, group.split) < 0:
                    continue
                if group.dirty:
                    hit = True  # already to be judged again: this move may settle it
                    break
                if ended or not (
                    t.placement == group.join or self.plan.can_reach(t.placement, group.join)
                ):
                    group.dirty = hit = True
                    break
        return hit

    async def evaluate_joins(self) -> None:
        for key, group in list(self.joins.items()):
            if group.fired or self.end is not None:
                continue
            p = self.plan.placements[group.join]
            assert isinstance(p, Join)
            branches = group.branches
            need = self.plan.join_needs.get(group.join) or group.count
            if len(branches) >= need:
                output = "success"
            elif not group.dirty:
                continue
            else:
                group.dirty = False
                arrived_ids = {t.id for t in group.arrived}
                pending_branches = {
                    first_branch(t, group.split)
                    for t in self.tokens.values()
                    if t.id not in arrived_ids
                    and first_branch(t, group.split) >= 0
                    and (t.placement == group.join or self.plan.can_reach(t.placement, group.join))
                } - branches
                if not branches:
                    if pending_branches:
                        group.dirty = True  # judged again when one arrives
                        continue
                    output = "empty"
                elif len(branches) + len(pending_branches) >= need:
                    continue
                else:
                    output = "error"
            group.fired = True
            del self.joins[key]
            if output == "empty" and output not in p.route_map():
                continue  # nothing arrived and nothing routes it: the branches ended elsewhere
            await self.fire_join(group, p, output)

    async def fire_join(self, group: JoinGroup, p: Join, output: str) -> None:
        for key, other in list(self.joins.items()):
            if other.split == group.split and not other.arrived:
                del self.joins[key]  # the split is joined: its other joins expect nothing
        arrived = group.arrived
        if not arrived:
            # No branch arrived, and none can any more: a token leaves the join by ``empty``.
            arrived = [self.new_token(p.id, group.lineage)]
        losers: list[TokenRecord] = []
        if p.mode is not JoinMode.ALL:
            ids = {t.id for t in arrived}
            losers = [
                t
                for t in self.tokens.values()
                if t.id not in ids and first_branch(t, group.split) >= 0
            ]
        extra_events = []
        for t in losers:
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
            self.tokens.pop(t.id, None)
        cont = first
        cont.lineage = tuple(f for f in cont.lineage if f[0] != group.split)
        moved = await self.move(
            cont,
            p,
            output,
            event=lambda to: JoinFired(
                output=output, arrived=arrived_count, branches=branches, to=to
            ),
            extra=[*arrived[1:], *losers],
            extra_events=extra_events,
            due_cleared=[t.id for t in losers],
        )
        if moved.next is not None:
            self.spawn(moved.next)
        if self.joins:
            await self.evaluate_joins()

    def kill(self, t: TokenRecord, reason: CancelReason) -> None:
        """Cancel a live token: its running code (if any) and its pending due instant."""
        t.status = S.CANCELLED
        t.due = None
        t.epoch += 1
        self.close_park(t, ParkStatus.CANCELLED, reason.value)
        self.tokens.pop(t.id, None)
        self.note_moves([t], ended=True)
        running = self.running.get(t.id)
        if running is not None:
            running[1].cancel(reason, self.clock.now())
        for key, (_, scope) in list(self.running.items()):
            if key.startswith(t.id + "/"):
                scope.cancel(reason, self.clock.now())
