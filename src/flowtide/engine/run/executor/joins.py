"""Joins: branches of a split arrive, and a join fires success, error or empty; a first or quorum
join cancels the losers. What fires and whom it cancels is decided in
:mod:`flowtide.engine.run.joins`; this part commits and applies it.
"""

from __future__ import annotations

from typing import Protocol

from flowtide.engine.event_types import JoinFired, TokenCancelled
from flowtide.engine.run.attempts import Running
from flowtide.engine.run.executor.ports import MovePort, StepPort
from flowtide.engine.run.joins import (
    JoinFiring,
    arrive,
    arrived_branches,
    close_split,
    losers,
    next_firing,
    note_moves,
)
from flowtide.engine.run.move import Move
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.placements import Join
from flowtide.store.base import (
    Commit,
    ParkStatus,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class JoinHost(StepPort, Protocol):
    """What join groups need of the executor besides a step: the run's running scopes, new
    tokens and their tasks, and closing a park."""

    @property
    def running(self) -> Running: ...

    def new_token(
        self, placement: str, lineage: tuple[tuple[str, int, int], ...]
    ) -> TokenRecord: ...

    def spawn(self, token: TokenRecord) -> None: ...

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None: ...


class Joins:
    """The run's join groups, through ``ex``: arrivals, firings, their losers cancelled. A join
    that fires moves its token on through ``router`` (which never calls back here: the join
    groups a firing makes ready are fired by :meth:`evaluate`'s own loop)."""

    def __init__(self, ex: JoinHost, router: MovePort) -> None:
        self.ex = ex
        self.router = router

    async def at_join(self, token: TokenRecord, p: Join) -> TokenRecord | None:
        """``token`` arrives at join ``p`` (a token of no split passes straight on). A branch's
        move records its arrival itself (see the router): this counts one stored ready at the
        join, as runs rebuilt from an older store may have."""
        ex = self.ex
        if not token.lineage:
            passed = await self.router.move(
                Move(
                    token,
                    p,
                    "success",
                    event=lambda to: JoinFired(output="success", arrived=1, branches=[], to=to),
                )
            )
            if passed.joins_due:
                await self.evaluate()
            return passed.next
        ev = ex.event(token, arrive(ex.view.joins, token, p.id))
        if not await ex.commit(
            Commit(ex.view.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        await self.evaluate()
        return None

    async def token_ended(self, token: TokenRecord) -> None:
        """``token`` ended away from a join (a terminal, a dead end): fire the join groups
        that counted on it."""
        ex = self.ex
        if ex.view.joins and note_moves(ex.view.joins, ex.plan, [token], ended=True):
            await self.evaluate()

    async def evaluate(self) -> None:
        """Fire the join groups that fire now, one after another, while the run goes on."""
        ex = self.ex
        while ex.view.end is None:
            firing = next_firing(ex.view.joins, ex.plan, ex.view.tokens)
            if firing is None:
                return
            await self.fire(firing)

    async def fire(self, firing: JoinFiring) -> None:
        """Fire ``firing``: one token leaves the join by its output, the losers are cancelled."""
        ex = self.ex
        group, p, output = firing.group, firing.join, firing.output
        close_split(ex.view.joins, group.split)
        arrived = group.arrived
        if not arrived:
            # No branch arrived, and none can any more: a token leaves the join by ``empty``.
            arrived = [ex.new_token(p.id, group.lineage)]
        cancelled = losers(firing, ex.view.tokens)
        extra_events = []
        for t in cancelled:
            self.kill(t, CancelReason.JOIN_LOSER)
            extra_events.append(
                ex.event(t, TokenCancelled(reason=CancelReason.JOIN_LOSER.value, join=p.id))
            )
        came = group.arrived
        # Read before the joined token leaves the split (else its own branch reads as -1).
        arrived_count, branches = len(came), arrived_branches(came, group.split)
        first = arrived[0]
        for t in arrived[1:]:
            t.status = S.DONE
            ex.view.tokens.pop(t.id, None)
        cont = first
        cont.lineage = tuple(f for f in cont.lineage if f[0] != group.split)
        moved = await self.router.move(
            Move(
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
        )
        if moved.next is not None:
            ex.spawn(moved.next)

    def kill(self, t: TokenRecord, reason: CancelReason) -> None:
        """Cancel a live token: its running code (if any) and its pending due instant."""
        ex = self.ex
        t.status = S.CANCELLED
        t.due = None
        t.epoch += 1
        ex.close_park(t, ParkStatus.CANCELLED, reason.value)
        ex.view.tokens.pop(t.id, None)
        note_moves(ex.view.joins, ex.plan, [t], ended=True)
        running = ex.running.get(t.id)
        if running is not None:
            running[1].cancel(reason, ex.clock.now())
        for key, (_, scope) in list(ex.running.items()):
            if key.startswith(t.id + "/"):
                scope.cancel(reason, ex.clock.now())
