"""The run executor: drives one run's tokens through its flow on the event loop.

Each live token is driven by one asyncio task, placement after placement; a parallel split
gives each new branch a task of its own, so independent branches run at the same time. Waiting
tokens (waits, retry backoffs) and parked tokens have no task at all: their due instants (a
wait, a backoff, a park deadline, escalation timers) are in the store, and the engine's sweeper
hands them back here when they are due; a signal hands a parked token back too.

When a run has only waiting and parked tokens left (a subflow's token whose child waits parked
counts as parked) it is *quiescent*: its lifecycle becomes ``parked`` and the executor lets go
of it: the engine forgets it, and a signal, the sweeper or the end of a subflow's child rebuilds
an executor from the store (:meth:`RunExecutor.restore`).

A parked token is moved by exactly one of {signal, park timeout, interrupting timer, cancel}:
each first claims the token in memory (synchronously, so a second claimant in this process sees
it taken) and then commits with ``Commit.expect`` (status ``parked`` and the park's epoch; for a
signal also "deadline still ahead"), so the store refuses the loser across processes too.

The executor is its core (:mod:`~flowtide.engine.run.executor.core`: the view, the commit of a
step, the tasks) and the parts it holds, each behind a protocol of what it needs: the run's
start (:mod:`~flowtide.engine.run.executor.launching`), signals
(:mod:`~flowtide.engine.run.executor.signals`), due entries fired
(:mod:`~flowtide.engine.run.executor.firing`), settling and letting go
(:mod:`~flowtide.engine.run.executor.settling`) and the run's end
(:mod:`~flowtide.engine.run.executor.ending`), besides the token parts of the core. What is left
here is the driver: each token's task, placement after placement, handing each kind of
placement to the part that does it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.restoring import restore_view
from flowtide.engine.timing.scope import CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.store.base import (
    DueEntry,
    RunRecord,
    RunSnapshot,
    TokenStatus,
)

S = TokenStatus


YIELD_EVERY = 16
"""A token's task gives the event loop a turn after this many steps in a row."""


class RunExecutor(RunCore):
    """One run, driven from its start or rebuilt from the store: the parts it holds, and each
    token's task."""

    def __init__(
        self,
        host: RunHost,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        *,
        code: FlowCode,
        parent_scope: CancelScope | None = None,
    ) -> None:
        super().__init__(host, plan, run, state, code=code, parent_scope=parent_scope)

    def restore(self, snapshot: RunSnapshot) -> None:
        """Rebuild in-memory bookkeeping from the run's snapshot (before resuming): its tokens,
        the history after its resume checkpoint, its node anchors and open parks."""
        self.started = True
        restored = restore_view(self.view, self.plan, snapshot.tokens, snapshot.history)
        self.committer.restored(restored.seq)
        self.ids = itertools.count(restored.next_id)
        for anchor in snapshot.anchors:
            self.view.anchors[(anchor.placement, anchor.item)] = anchor.at
        for park in snapshot.parks:
            token = self.view.tokens.get(park.token_id)
            if token is not None and token.status is S.PARKED and token.epoch == park.epoch:
                self.view.parks[park.token_id] = park

    def fire_come(self, due: Sequence[DueEntry], now: datetime) -> int:
        """Fire the run's due entries whose instant has come by ``now`` (its lease is held
        here); how many were not being fired already."""
        come = [e for e in due if e.when <= now]
        fired = 0
        if come and self.settler.pin():
            try:
                fired = self.due_firing.fire_all(come)
            finally:
                self.settler.unpin()
        return fired

    def resume_tokens(self) -> None:
        """Start driving restored tokens (waiting and parked ones have their due entries in the
        store: the sweeper fires them)."""
        for t in list(self.view.tokens.values()):
            if t.status is S.RUNNING and self.plan.placements[t.placement].kind == "subflow":
                # It waits for its child again (its start is not made again: a timer firing
                # first is kept for it, as for any attempt starting).
                self.starting.add(t.id)
                self.spawn(t)
            elif t.status in (S.READY, S.RUNNING):
                t.status = S.READY
                self.spawn(t)
        self.run_start.arm_deadline()
