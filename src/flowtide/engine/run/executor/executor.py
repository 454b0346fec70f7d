"""The run executor: drives one run's tokens through its flow on the event loop.

Each live token is driven by one asyncio task, placement after placement; a parallel split
gives each new branch a task of its own, so independent branches run at the same time. Waiting
tokens (waits, retry backoffs) and parked tokens have no task at all: their due instants (a
wait, a backoff, a park deadline, escalation timers) are in the store, and the engine's sweeper
hands them back here when they are due; a signal hands a parked token back too.

When a run has only waiting and parked tokens left it is *quiescent*: its lifecycle becomes
``parked`` and, unless it is a child run (its parent is waiting on it), the executor lets go of
it: the engine forgets it, and a signal or the sweeper rebuilds an executor from the store
(:meth:`RunExecutor.restore`).

A parked token is moved by exactly one of {signal, park timeout, interrupting timer, cancel}:
each first claims the token in memory (synchronously, so a second claimant in this process sees
it taken) and then commits with ``Commit.expect`` (status ``parked`` and the park's epoch; for a
signal also "deadline still ahead"), so the store refuses the loser across processes too.

The executor is its core, the parts it holds and the classes over it (see
:mod:`flowtide.engine.run.executor.core`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from flowtide.engine.run.executor.driving import Driving
from flowtide.engine.run.restoring import restore_view
from flowtide.store.base import (
    EventRecord,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class RunExecutor(Driving):
    """One run, driven from its start or rebuilt from the store."""

    def restore(self, tokens: Sequence[TokenRecord], history: Sequence[EventRecord]) -> None:
        """Rebuild in-memory bookkeeping from stored tokens and history (before resuming):
        ``history`` is what follows the run's resume checkpoint (all of it without one)."""
        self.started = True
        restored = restore_view(self.view, self.plan, tokens, history)
        self.committer.restored(restored.seq)
        self.ids = itertools.count(restored.next_id)

    async def load_extras(self) -> None:
        """Read the run's node anchors and open parks from the store (before resuming)."""
        store = self.host.store
        if self.plan.anchored:  # (a run of a flow without node anchors has none stored)
            for anchor in await store.node_anchors(self.view.run.id):
                self.view.anchors[(anchor.placement, anchor.item)] = anchor.at
        for park in await store.parks(run_id=self.view.run.id, open_only=True):
            token = self.view.tokens.get(park.token_id)
            if token is not None and token.status is S.PARKED and token.epoch == park.epoch:
                self.view.parks[park.token_id] = park

    def resume_tokens(self) -> None:
        """Start driving restored tokens (waiting and parked ones have their due entries in the
        store: the sweeper fires them)."""
        for t in list(self.view.tokens.values()):
            if t.status in (S.READY, S.RUNNING):
                t.status = S.READY
                self.spawn(t)
        self.arm_deadline()
