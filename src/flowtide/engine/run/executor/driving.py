"""Driving a run: its start, its tokens' tasks, the run deadline and cancel, settling when only
waits are left, and its end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.errors import (
    DrainedWithoutTerminal,
    StoreUnavailableError,
)
from flowtide.engine.event_types import (
    NodeStarted,
    RunStarted,
    RunWarning,
    TokenCancelled,
)
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.result import ErrorInfo, InterruptedAt, ParkedToken, RunResult
from flowtide.engine.run.children import child_run_id, parent_wake
from flowtide.engine.run.due import DEADLINE
from flowtide.engine.run.executor.child_runs import ChildRuns
from flowtide.engine.run.executor.closing import RunClosing
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.executor.records import end_reason, end_result, finish
from flowtide.engine.run.move import Move
from flowtide.engine.run.scatter import ScatterRun
from flowtide.engine.run.view import RunEnd
from flowtide.engine.timing.scope import Cancellation, CancelReason, CancelScope
from flowtide.engine.worker._host import RunHost
from flowtide.model.placements import (
    PhaseKind,
    Scatter,
    Terminal,
)
from flowtide.store.base import (
    Checkpoint,
    Commit,
    DueEntry,
    NodeAnchor,
    ParkStatus,
    RequestAnswer,
    RunRecord,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


YIELD_EVERY = 16
"""A token's task gives the event loop a turn after this many steps in a row."""


class Driving(RunCore):
    """A run from its start to its end."""

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

    def launch(self, entry: str | None) -> None:
        """Start :meth:`main` in its own task (held until it ends)."""
        self.tasks.add(asyncio.get_running_loop().create_task(self.main(entry)))

    async def main(self, entry: str | None) -> None:
        """Start the run: lifecycle running, pre phases, then the entrypoint's token."""
        task = asyncio.current_task()
        assert task is not None
        try:
            if self.view.end is not None:
                return
            self.view.run.lifecycle = transition(self.view.run.lifecycle, Lifecycle.RUNNING).value
            self.view.run.started_at = self.clock.now()
            self.started = True
            pre = self.flow.phases(PhaseKind.PRE)
            first: list[TokenRecord] = []
            events = [
                self.event(
                    None,
                    RunStarted(
                        flow=self.flow.id,
                        version=self.flow.version,
                        deadline=isoformat(self.view.run.deadline)
                        if self.view.run.deadline
                        else None,
                    ),
                )
            ]
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            if not pre:
                # No pre phase: the entrypoint's token is created in the same commit, and its
                # first attempt started there too when it is a task.
                token = self.new_token(self.entry_target(entry), ())
                first = [token]
                q = self.plan.placements.get(token.placement)
                if (
                    q is not None
                    and q.kind == "task"
                    and self.attempts.take_thread_now(token.id, self.code.impls[q.id])
                ):
                    started, anchors, due = self.arming.start_attempt(
                        token, q.id, self.plan.nodes[q.id], self.plan.settings[q.id]
                    )
                    events.append(started)
                    self.prestarted.add(token.id)
            await self.commit(
                Commit(
                    self.view.run.id,
                    run=self.view.run,
                    tokens=first,
                    events=events,
                    anchors=anchors,
                    due=due,
                )
            )
            self.arm_deadline()
            if self.view.end is not None:
                return
            if first:
                await self.drive(first[0])  # in this task: no task of its own
                return
            for phase in pre:
                err = await self.phases.run(phase)
                if self.view.end is not None:
                    return
                if err is not None:
                    self.request_end(Lifecycle.FAILED, [err])
                    return
            token = self.new_token(self.entry_target(entry), ())
            await self.commit(Commit(self.view.run.id, tokens=[token]))
            self.spawn(token)
        except Exception as exc:
            self.request_end(Lifecycle.FAILED, [self.error_info(exc)])
        finally:
            self.tasks.discard(task)
            self.maybe_drained()

    def entry_target(self, entry: str | None) -> str:
        if entry is not None and entry in self.flow.entrypoints:
            return self.flow.entrypoints[entry]
        return entry or self.flow.main_entrypoint

    def arm_deadline(self) -> None:
        if self.view.run.deadline is None or self.view.end is not None:
            return
        deadline = self.view.run.deadline

        def fire() -> None:
            self.root.cancel(CancelReason.RUN_DEADLINE, deadline)

        if deadline <= self.clock.now():
            fire()  # over already: no step more
            return
        self.deadline_timer = self.clock.call_at(deadline, fire)

    def cancel(self, reason: str | None = None, sender: str | None = None) -> bool:
        """The caller's cancel: every running node is cancelled; lifecycle ``cancelled``."""
        if self.view.end is not None:
            return False
        return self.root.cancel(CancelReason.ABORT, self.clock.now(), reason, sender)

    def on_root_cancelled(self, c: Cancellation) -> None:
        if self.view.end is not None:
            return
        timeout = c.reason in (CancelReason.RUN_DEADLINE, CancelReason.NODE_TIMEOUT)
        lifecycle = Lifecycle.TIMED_OUT if timeout else Lifecycle.CANCELLED
        reason = "timeout" if timeout else "abort"
        nodes = tuple(dict.fromkeys(p for p, _ in self.running.values()))
        if not nodes:
            nodes = tuple(dict.fromkeys(t.placement for t in self.view.tokens.values()))
        if not nodes and not self.started:
            nodes = (self.flow.main_entrypoint,)
        interrupted = InterruptedAt(reason, nodes[0] if nodes else None, c.at, nodes, c.sender)
        errors = []
        if c.message:
            errors.append(ErrorInfo("RunCancelled", c.message, None))
        self.request_end(lifecycle, errors, interrupted, cancel_reason=None)

    def maybe_drained(self) -> None:
        if self.view.end is not None or self.closed or self.working() or not self.started:
            return
        if self.released:
            return
        if self.pins:
            return
        if self.handed_off:
            if self.handing is None:
                self.handing = asyncio.get_running_loop().create_task(self.hand_off())
            return
        if self.child_waits or any(
            t.status in (S.WAITING, S.PARKED) for t in self.view.tokens.values()
        ):
            settling = self.settling is not None and not self.settling.done()
            if not settling and self.quiescent():
                self.settling = asyncio.get_running_loop().create_task(self.settle())
            return
        if self.view.tokens:
            stuck = sorted({t.placement for t in self.view.tokens.values()})
            self.request_end(Lifecycle.FAILED, [self.error_info(DrainedWithoutTerminal(stuck))])
        elif self.view.terminals:
            self.request_end(Lifecycle.COMPLETED)
        else:
            self.request_end(
                Lifecycle.FAILED,
                [self.error_info(DrainedWithoutTerminal(self.view.last_placements))],
            )

    def quiescent(self) -> bool:
        """Only waiting/parked (and join-arrived) tokens are left, and nothing runs."""
        if self.view.end is not None or self.closed or self.working() or self.pins:
            return False
        # (A subflow token whose child waits parked counts as parked.)
        statuses = {t.status for t in self.view.tokens.values() if t.id not in self.child_waits}
        if self.child_waits:
            statuses.add(S.PARKED)
        return bool(statuses & {S.WAITING, S.PARKED}) and not statuses & {S.READY, S.RUNNING}

    def parked_now(self) -> RunResult | None:
        """The run as it is, if it waits parked now (settled, nothing at work); else None."""
        if self.view.run.lifecycle != Lifecycle.PARKED.value or not self.quiescent():
            return None
        result = self.snapshot()
        return result if result.parked else None

    def parked_tokens(self) -> tuple[ParkedToken, ...]:
        out = []
        for t in self.view.tokens.values():
            park = self.view.parks.get(t.id)
            if t.status is S.PARKED and park is not None:
                out.append(
                    ParkedToken(
                        t.id, t.placement, park.key, t.deadline, park.payload, park.parked_at
                    )
                )
        for wait in self.child_waits.values():
            out.extend(wait.parked)
        return tuple(out)

    def snapshot(self) -> RunResult:
        """The run as it is now (lifecycle ``parked`` at a quiescent point)."""
        return RunResult(
            run_id=self.view.run.id,
            lifecycle=Lifecycle(self.view.run.lifecycle),
            outcome=None,
            state=dict(self.view.state),
            parked=self.parked_tokens(),
            warnings=tuple(self.view.warnings),
            terminals=tuple(self.view.terminals),
        )

    async def settle(self) -> None:
        """The run is quiescent: lifecycle ``parked``, tell who waits, and let go of it."""
        await asyncio.sleep(0)
        async with self.steps.hold():
            if not self.quiescent():
                return
            c = Commit(self.view.run.id)
            if self.view.run.lifecycle != Lifecycle.PARKED.value:
                self.view.run.lifecycle = transition(
                    self.view.run.lifecycle, Lifecycle.PARKED
                ).value
                c.run = self.view.run
            if self.view.run.deadline is not None:
                # Nothing holds the run's deadline timer any more: the sweeper will.
                c.due = [DEADLINE.entry(self.view.run.deadline, self.view.run.id, self.view.run.id)]
            # What a rebuild needs beyond the tokens, so that it reads no older history.
            self.view.run.checkpoint = Checkpoint(
                self.committer.last_seq(),
                dict(self.view.visits),
                list(self.view.terminals),
                self.view.outcome,
            )
            c.run = self.view.run
            c.release = True  # nobody holds it now: its wake instant is its next due entry
            try:
                await self.commit(c)
            except (StoreConflict, StoreUnavailableError) as exc:
                # Another worker took the run, or the store stays down: the run is as the
                # store has it.
                self.lose_view(exc)
                return
            if not self.quiescent():
                if not self.closed:
                    await self._take_back()
                return
            result = self.snapshot()
            self.released = True
            if self.deadline_timer is not None:
                self.deadline_timer.cancel()
                self.deadline_timer = None
            self.root.close()
            if self.child_waits:
                # Its subflows' tokens stay running in the store, each waiting for its child,
                # whose end wakes this run (see flowtide.engine.run.children): their tasks go.
                self.close()
            self.host.let_go(self)
        self.host.settled(result)

    async def _take_back(self) -> None:
        """Something came (a cancel, a firing) while the commit that gave the run back was under
        way: its lease is taken again, for what follows to be committed (else this view is
        dropped)."""
        lease, now = self.lease, self.clock.now()
        taken = None
        if lease is not None:
            with contextlib.suppress(StoreError):
                taken = await self.host.store.acquire_run(
                    self.view.run.id, lease.owner, now, max(lease.expires, now)
                )
        if taken is None:
            self.host.discard(self)
            return
        self.lease = taken

    async def hand_off(self) -> None:
        """This engine runs no nodes, and a token is ready: give the run back to the store (it
        needs a worker at once) and let go of it."""
        await asyncio.sleep(0)
        async with self.steps.hold():
            if self.view.end is not None or self.closed or self.released or self.tasks or self.pins:
                return
            self.view.run.checkpoint = Checkpoint(
                self.committer.last_seq(),
                dict(self.view.visits),
                list(self.view.terminals),
                self.view.outcome,
            )
            try:
                await self.commit(Commit(self.view.run.id, run=self.view.run, release=True))
            except (StoreConflict, StoreUnavailableError) as exc:
                self.lose_view(exc)
                return
            self.released = True
            if self.deadline_timer is not None:
                self.deadline_timer.cancel()
                self.deadline_timer = None
            self.root.close()
            self.host.let_go(self)
        self.host.settled(self.snapshot())

    def pin(self) -> bool:
        """Keep the executor from being let go while a signal or a firing works on it; False if
        it has already been let go (rebuild one from the store)."""
        if self.released or self.closed:
            return False
        self.pins += 1
        return True

    def unpin(self) -> None:
        self.pins -= 1
        self.maybe_drained()

    async def finalize(self) -> None:
        me = asyncio.current_task()
        while True:
            pending = [t for t in self.tasks if t is not me and not t.done()]
            if not pending:
                break
            await asyncio.gather(*pending, return_exceptions=True)
        if self.closed:
            return
        end = self.view.end
        assert end is not None
        try:
            await self._cancel_leftovers(end)
            if self.started and self.plan.post:
                for phase in self.flow.phases(PhaseKind.POST):
                    err = await self.phases.run(phase, post=True)
                    if err is not None:
                        msg = f"post phase {phase.id!r} failed: {err.type}: {err.message}"
                        self.view.warnings.append(msg)
                        await self.commit(
                            Commit(
                                self.view.run.id,
                                events=[
                                    self.event(None, RunWarning(message=msg), placement=phase.id)
                                ],
                            )
                        )
            result = end_result(
                self.view.run.id,
                end.lifecycle,
                dict(self.view.state),
                self.view.terminals,
                self.view.outcome,
                errors=end.errors,
                interrupted=end.interrupted,
                warnings=self.view.warnings,
            )
            now = self.clock.now()
            finished = finish(self.view.run, result, now)
            cancelled = {"cancelled": end.lifecycle is Lifecycle.CANCELLED}
            asked = dict.fromkeys(self.cancels)
            await self.commit(
                Commit(
                    self.view.run.id,
                    run=self.view.run,
                    due_cleared=[self.view.run.id] if self.view.run.deadline is not None else (),
                    events=[finished],
                    release=True,
                    requests_answered=[RequestAnswer(i, cancelled, now) for i in asked],
                    wakes=parent_wake(self.view.run, now),  # (a subflow's child: its parent)
                )
            )
        except (StoreConflict, StoreUnavailableError) as exc:
            # Another actor ended the run first (see LIVE_LIFECYCLES), or the store stays down:
            # the run is as the store has it.
            self.lose_view(exc)
            return
        finally:
            self.root.close()
            self.host.forget(self)
        if self.view.run.parent_token_id is not None:
            self.host.wake_sweeper(now)  # (its parent is due now: this engine may take it)
        self.host.ended(result)

    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None,
    ) -> RunClosing | None:
        if self.view.end is not None or self.closed or not self.started:
            return None
        gone = {t.id for t, _ in ending}
        if any(token_id not in gone for token_id in self.view.tokens):
            return None  # (other tokens go on)
        if not set(self.view.anchors) <= set(released):
            return None  # (the end's own step releases them)
        if self.child_waits or self.cancels or self.handed_off or self.plan.post:
            return None
        if self.root.cancellation is not None:
            return None
        me = asyncio.current_task()
        if any(t is not me and not t.done() for t in self.tasks):
            return None  # (something else is at work: the end waits for it, as it would)
        return RunClosing(self.view, self.clock, c, ending, update)

    def ended_by_step(self, closing: RunClosing) -> None:
        result = closing.committed()  # (the view's end was set with the commit's)
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        self.root.close()
        self.host.forget(self)
        if self.view.run.parent_token_id is not None:
            self.host.wake_sweeper(self.clock.now())  # (its parent is due now: see finalize)
        self.host.ended(result)

    async def _cancel_leftovers(self, end: RunEnd) -> None:
        """The run's end, first step: its live tokens cancelled, its node anchors released."""
        async with self.steps.hold():
            leftovers = list(self.view.tokens.values())
            self.view.tokens.clear()
            why = end_reason(end)
            for t in leftovers:
                t.status = S.CANCELLED
                t.epoch += 1
                self.close_park(t, ParkStatus.CANCELLED, why)
            events = [self.event(t, TokenCancelled(reason="run_ended")) for t in leftovers]
            released = list(self.view.anchors)
            self.view.anchors.clear()
            if leftovers or released or self.committer.closing_parks:
                await self.commit(
                    Commit(
                        self.view.run.id,
                        tokens=leftovers,
                        events=events,
                        due_cleared=[t.id for t in leftovers],
                        anchors_released=released,
                    )
                )
        # A subflow's child goes with its parent, wherever it is driven (one under this run's
        # scope has been cancelled with it already).
        children = [
            child_run_id(self.view.run.id, t.id, t.visit, t.attempt)
            for t in leftovers
            if self.plan.placements[t.placement].kind == "subflow"
        ]
        if children:
            await self.host.cancel_children(children, f"its parent ended: {why}")

    def close(self, notify: bool = True) -> None:
        """Stop driving this run without recording anything (the engine is closing)."""
        self.closed = True
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        for task in list(self.tasks):
            task.cancel()
        if self.finalizer is not None:
            self.finalizer.cancel()

    async def drive(self, token: TokenRecord | None) -> None:
        """Drive ``token`` placement after placement."""
        placements = self.plan.placements
        steps = 0
        own = token.id if token is not None else None
        try:
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


_Handler = Callable[[Driving, TokenRecord, Any], Awaitable[TokenRecord | None]]
_HANDLERS: dict[str, _Handler] = {
    "task": lambda ex, token, p: ex.task_steps.at_task(token, p),
    "wait": lambda ex, token, p: ex.task_steps.at_wait(token, p),
    "join": lambda ex, token, p: ex.joins.at_join(token, p),
    "scatter": Driving.at_scatter,
    "subflow": lambda ex, token, p: ex.children.at_subflow(token, p),
    "terminal": lambda ex, token, p: ex.task_steps.at_terminal(token, p),
    "phase": lambda ex, token, p: ex.task_steps.at_phase(token, p),
}
"""What drives a token at each kind of placement."""
_RUNS_CODE = frozenset({"task", "scatter", "subflow"})
"""The kinds whose handler runs code (a node, items, a child run): it takes the step lock only
for its steps, never while that code runs."""
