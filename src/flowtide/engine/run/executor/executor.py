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

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.event_types import NodeStarted
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.executor.child_runs import ChildRuns
from flowtide.engine.run.executor.closing import RunClosing
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.executor.ending import RunEnding
from flowtide.engine.run.executor.launching import RunStart
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.executor.settling import Settling
from flowtide.engine.run.move import Move
from flowtide.engine.run.restoring import restore_view
from flowtide.engine.run.scatter import ScatterRun
from flowtide.engine.timing.scope import Cancellation, CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.model.placements import Scatter, Terminal
from flowtide.store.base import (
    Commit,
    DueEntry,
    RunRecord,
    RunSnapshot,
    StoreConflict,
    TokenRecord,
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
        self.children = ChildRuns(self)
        """The run's child runs (a subflow's token, a scatter's flow bodies)."""
        self.phases = Phases(self)
        """The run's pre and post phases."""
        self.run_start = RunStart(self)
        """The run's start and its deadline."""
        self.settler = Settling(self)
        """Settling the run (or handing it back) when nothing drives it any more."""
        self.ending = RunEnding(self)
        """The run's end (and the caller's cancel)."""

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

    async def finalize(self) -> None:
        await self.ending.finalize()

    def on_root_cancelled(self, c: Cancellation) -> None:
        self.ending.on_root_cancelled(c)

    def maybe_drained(self) -> None:
        self.settler.maybe_drained()

    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None,
    ) -> RunClosing | None:
        return self.ending.closing(c, ending, released, update)

    def ended_by_step(self, closing: RunClosing) -> None:
        self.ending.ended_by_step(closing)

    def close(self, notify: bool = True) -> None:
        """Stop driving this run without recording anything (the engine is closing)."""
        self.closed = True
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        for task in list(self.tasks):
            task.cancel()
        if self.finalizer is not None:
            self.finalizer.cancel()

    async def drive(
        self, token: TokenRecord | None, after: asyncio.Future[None] | None = None
    ) -> None:
        """Drive ``token`` placement after placement (once ``after`` is done, if given)."""
        placements = self.plan.placements
        steps = 0
        own = token.id if token is not None else None
        try:
            if after is not None:
                await asyncio.shield(after)
            while token is not None:
                if self.view.end is not None or token.status is S.CANCELLED:
                    return
                steps += 1
                if steps % YIELD_EVERY == 0:
                    # A node that never awaits (a hot loop back to itself), on a store that
                    # answers at once, must not starve the run's deadline, other runs or the
                    # sweeper.
                    await asyncio.sleep(0)
                p = placements[token.placement]
                if p.kind in _RUNS_CODE:
                    token = await _HANDLERS[p.kind](self, token, p)
                else:
                    async with self.steps.hold():  # the whole placement is one step
                        if self.view.end is not None or token.status is S.CANCELLED:
                            return  # (decided by the step that held the lock before)
                        token = await _HANDLERS[p.kind](self, token, p)
        except asyncio.CancelledError:
            if not self.closed:
                raise
        except (StoreConflict, StoreUnavailableError) as exc:
            self.lose_view(exc)
        except Exception as exc:
            placement = token.placement if token is not None else None
            self.request_end(Lifecycle.FAILED, [self.error_info(exc, placement)])
        finally:
            if own is not None:
                self.attempts.drop_thread(own)  # (a slot taken for an attempt that never ran)
            self.tasks.discard(asyncio.current_task())
            if not self.working():  # else _maybe_drained has nothing to do
                self.maybe_drained()

    async def at_scatter(self, token: TokenRecord, p: Scatter) -> TokenRecord | None:

        body = self.plan.nodes.get(p.id)
        async with self.steps.hold():
            if self.view.end is not None or token.status is S.CANCELLED:
                return None
            token.status = S.RUNNING
            started = self.event(
                token,
                NodeStarted(
                    visit=token.visit, kind="scatter", deadline=None, node=body, subflow=p.body.flow
                ),
            )
            if not await self.commit(
                Commit(self.view.run.id, tokens=[token], events=[started]), unless_ended=True
            ):
                return None
        base = dict(self.view.state)
        runner = ScatterRun(self, self.children, token, p)
        output, update = await runner.run(base)
        if output is None or self.view.end is not None or token.status is S.CANCELLED:
            return None
        self.view.last_placements = [p.id]
        return (
            await self.move(
                Move(
                    token,
                    p,
                    output,
                    event=lambda to: runner.finished(output, to),
                    update=lambda: self.merger.apply(self.view.state, base, {}, [], update),
                )
            )
        ).next


_Handler = Callable[[RunExecutor, TokenRecord, Any], Awaitable[TokenRecord | None]]
_HANDLERS: dict[str, _Handler] = {
    "task": lambda ex, token, p: ex.task_steps.at_task(token, p),
    "wait": lambda ex, token, p: ex.task_steps.at_wait(token, p),
    "join": lambda ex, token, p: ex.joins.at_join(token, p),
    "scatter": RunExecutor.at_scatter,
    "subflow": lambda ex, token, p: ex.children.at_subflow(token, p),
    "terminal": lambda ex, token, p: ex.task_steps.at_terminal(token, p),
    "phase": lambda ex, token, p: ex.task_steps.at_phase(token, p),
}
"""What drives a token at each kind of placement."""
_RUNS_CODE = frozenset({"task", "scatter", "subflow"})
"""The kinds whose handler runs code (a node, items, a child run): it takes the step lock only
for its steps, never while that code runs."""
