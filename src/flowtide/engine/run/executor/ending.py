"""A run's end: its root scope cancelled (a cancel, the run's deadline, a node's timeout), its
leftover tokens cancelled and anchors released, its post phases, the commit of its result (one
commit with the leftovers' when nothing comes between); or the end folded into its last step's
commit (:class:`~flowtide.engine.run.executor.closing.RunClosing`). A part the executor holds
(:class:`RunEnding`), calling back only through :class:`EndingHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.event_types import RunWarning, TokenCancelled
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ErrorInfo, InterruptedAt, RunResult
from flowtide.engine.run.attempts import Running
from flowtide.engine.run.children import child_run_id, parent_wake
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.executor.child_runs import ChildWaits
from flowtide.engine.run.executor.closing import RunClosing
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.executor.ports import EndPort, StepPort
from flowtide.engine.run.executor.records import end_reason, end_result, finish
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.view import RunEnd
from flowtide.engine.timing.scope import Cancellation, CancelReason
from flowtide.engine.worker._host import RunHost
from flowtide.model.flow import Flow
from flowtide.model.placements import PhaseKind, Terminal
from flowtide.store.base import (
    Commit,
    ParkStatus,
    RequestAnswer,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class EndingHost(StepPort, EndPort, Protocol):
    """What a run's end needs of the executor besides a step: the engine, the flow and its
    phases, the step lock, the committer, the run's tasks, running nodes, child waits, cancel
    requests and deadline timer, whether it started or is handed off, and closing its parks."""

    deadline_timer: Any

    @property
    def host(self) -> RunHost: ...

    @property
    def flow(self) -> Flow: ...

    @property
    def phases(self) -> Phases: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def committer(self) -> Committer: ...

    @property
    def tasks(self) -> set[asyncio.Future[Any]]: ...

    @property
    def running(self) -> Running: ...

    @property
    def children(self) -> ChildWaits: ...

    @property
    def cancels(self) -> list[str]: ...

    @property
    def started(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    @property
    def handed_off(self) -> bool: ...

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None: ...

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None: ...


class RunEnding:
    """Ends the run, through ``ex``."""

    def __init__(self, ex: EndingHost) -> None:
        self.ex = ex

    def on_root_cancelled(self, c: Cancellation) -> None:
        if self.ex.view.end is not None:
            return
        timeout = c.reason in (CancelReason.RUN_DEADLINE, CancelReason.NODE_TIMEOUT)
        lifecycle = Lifecycle.TIMED_OUT if timeout else Lifecycle.CANCELLED
        reason = "timeout" if timeout else "abort"
        nodes = tuple(dict.fromkeys(p for p, _ in self.ex.running.values()))
        if not nodes:
            nodes = tuple(dict.fromkeys(t.placement for t in self.ex.view.tokens.values()))
        if not nodes and not self.ex.started:
            nodes = (self.ex.flow.main_entrypoint,)
        interrupted = InterruptedAt(reason, nodes[0] if nodes else None, c.at, nodes, c.sender)
        errors = []
        if c.message:
            errors.append(ErrorInfo("RunCancelled", c.message, None))
        self.ex.request_end(lifecycle, errors, interrupted, cancel_reason=None)

    def cancel(self, reason: str | None = None, sender: str | None = None) -> bool:
        """The caller's cancel: every running node is cancelled; lifecycle ``cancelled``."""
        if self.ex.view.end is not None:
            return False
        return self.ex.root.cancel(CancelReason.ABORT, self.ex.clock.now(), reason, sender)

    async def finalize(self) -> None:
        me = asyncio.current_task()
        while True:
            pending = [t for t in self.ex.tasks if t is not me and not t.done()]
            if not pending:
                break
            await asyncio.gather(*pending, return_exceptions=True)
        if self.ex.closed:
            return
        end = self.ex.view.end
        assert end is not None
        try:
            async with self.ex.steps.hold():
                cancelled, children = self._leftovers(end)
                posting = self.ex.started and bool(self.ex.plan.post)
                if not children and not posting:
                    # Nothing comes between: the leftovers go with the end, in one commit.
                    result, now = await self._finish(end, cancelled)
                elif cancelled is not None:
                    await self.ex.commit(cancelled)
            if children or posting:
                if children:
                    # A subflow's child goes with its parent, wherever it is driven (one under
                    # this run's scope has been cancelled with it already).
                    why = end_reason(end)
                    await self.ex.host.cancel_children(children, f"its parent ended: {why}")
                if posting:
                    await self._post_phases()
                result, now = await self._finish(end, None)
        except (StoreConflict, StoreUnavailableError) as exc:
            # Another actor ended the run first (see LIVE_LIFECYCLES), or the store stays down:
            # the run is as the store has it.
            self.ex.lose_view(exc)
            return
        finally:
            self.ex.root.close()
            self.ex.host.forget(self.ex)
        if self.ex.view.run.parent_token_id is not None:
            self.ex.host.wake_sweeper(now)  # (its parent is due now: this engine may take it)
        self.ex.host.ended(result)

    async def _post_phases(self) -> None:
        """The flow's post phases, each failure recorded as a warning of the run."""
        for phase in self.ex.flow.phases(PhaseKind.POST):
            err = await self.ex.phases.run(phase, post=True)
            if err is not None:
                msg = f"post phase {phase.id!r} failed: {err.type}: {err.message}"
                self.ex.view.warnings.append(msg)
                await self.ex.commit(
                    Commit(
                        self.ex.view.run.id,
                        events=[self.ex.event(None, RunWarning(message=msg), placement=phase.id)],
                    )
                )

    async def _finish(self, end: RunEnd, leftovers: Commit | None) -> tuple[RunResult, datetime]:
        """Commit the run's end (with ``leftovers``, the commit of its leftover tokens, if it
        goes with it); its result and the instant it ended."""
        v = self.ex.view
        result = end_result(
            v.run.id,
            end.lifecycle,
            dict(v.state),
            v.terminals,
            v.outcome,
            errors=end.errors,
            interrupted=end.interrupted,
            warnings=v.warnings,
        )
        now = self.ex.clock.now()
        finished = finish(v.run, result, now)
        cancelled = {"cancelled": end.lifecycle is Lifecycle.CANCELLED}
        asked = dict.fromkeys(self.ex.cancels)
        c = leftovers if leftovers is not None else Commit(v.run.id)
        c.run = v.run
        if v.run.deadline is not None:
            c.due_cleared = [*c.due_cleared, v.run.id]
        c.events = [*c.events, finished]
        c.release = True
        c.requests_answered = [RequestAnswer(i, cancelled, now) for i in asked]
        c.wakes = parent_wake(v.run, now)  # (a subflow's child: its parent)
        await self.ex.commit(c)
        return result, now

    def _leftovers(self, end: RunEnd) -> tuple[Commit | None, list[str]]:
        """The run's end, first step (under the step lock): its live tokens cancelled, its node
        anchors released, in memory; their commit (None: nothing to write), and the subflow
        children to cancel with it."""
        leftovers = list(self.ex.view.tokens.values())
        self.ex.view.tokens.clear()
        why = end_reason(end)
        for t in leftovers:
            t.status = S.CANCELLED
            t.epoch += 1
            self.ex.close_park(t, ParkStatus.CANCELLED, why)
        events = [self.ex.event(t, TokenCancelled(reason="run_ended")) for t in leftovers]
        released = list(self.ex.view.anchors)
        self.ex.view.anchors.clear()
        cancelled = None
        if leftovers or released or self.ex.committer.closing_parks:
            cancelled = Commit(
                self.ex.view.run.id,
                tokens=leftovers,
                events=events,
                due_cleared=[t.id for t in leftovers],
                anchors_released=released,
            )
        children = [
            child_run_id(self.ex.view.run.id, t.id, t.placement, t.visit, t.attempt)
            for t in leftovers
            if self.ex.plan.placements[t.placement].kind == "subflow"
        ]
        return cancelled, children

    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None,
    ) -> RunClosing | None:
        if self.ex.view.end is not None or self.ex.closed or not self.ex.started:
            return None
        gone = {t.id for t, _ in ending}
        if any(token_id not in gone for token_id in self.ex.view.tokens):
            return None  # (other tokens go on)
        if not set(self.ex.view.anchors) <= set(released):
            return None  # (the end's own step releases them)
        if self.ex.children.waits or self.ex.cancels or self.ex.handed_off or self.ex.plan.post:
            return None
        if self.ex.root.cancellation is not None:
            return None
        me = asyncio.current_task()
        if any(t is not me and not t.done() for t in self.ex.tasks):
            return None  # (something else is at work: the end waits for it, as it would)
        return RunClosing(self.ex.view, self.ex.clock, c, ending, update)

    def ended_by_step(self, closing: RunClosing) -> None:
        result = closing.committed()  # (the view's end was set with the commit's)
        if self.ex.deadline_timer is not None:
            self.ex.deadline_timer.cancel()
        self.ex.root.close()
        self.ex.host.forget(self.ex)
        if self.ex.view.run.parent_token_id is not None:
            self.ex.host.wake_sweeper(self.ex.clock.now())  # (its parent is due now: see finalize)
        self.ex.host.ended(result)
