"""Child runs: a subflow placement's token, and any child run a part of the run starts (a
scatter's items whose body is a flow), each in a child scope bounded by its window."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from flowtide.clock import isoformat
from flowtide.engine.errors import RecursionDepthError, SubflowFailedError, unavailable
from flowtide.engine.event_types import NodeFailed, NodeStarted, SubflowFinished, SubflowStarted
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ParkedToken, RunResult
from flowtide.engine.run.attempts import COMPUTE, Attempt, Running
from flowtide.engine.run.children import StartedChild, child_run_id
from flowtide.engine.run.due import TIMEOUT
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.ports import DrainPort, EndPort, MovePort, StepPort
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.move import Move
from flowtide.engine.state.paths import get_path, set_path
from flowtide.engine.state.reducers import StateMerger, copy_state
from flowtide.engine.timing.deadlines import attempt_deadline
from flowtide.engine.timing.scope import Cancellation, CancelReason, CancelScope, ScopeDeadline
from flowtide.engine.worker._host import RunHost
from flowtide.model.flow import Flow
from flowtide.model.placements import Subflow
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    Commit,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


@dataclass(frozen=True, slots=True)
class ChildWait:
    """A subflow token's task, waiting for a child run that waits parked, and the child's
    parked tokens (each with the run it is in). The run counts that token as parked: it may
    settle and be let go, that task with it (the child's end wakes it from the store)."""

    task: asyncio.Future[Any] | None
    parked: tuple[ParkedToken, ...]


class ChildWaits(Protocol):
    """The subflow tokens whose child waits parked, as settling and the run's end see them."""

    @property
    def waits(self) -> Mapping[str, ChildWait]: ...

    def parked(self) -> list[ParkedToken]: ...


class ChildRunHost(StepPort, MovePort, EndPort, Protocol):
    """What child runs need of the executor besides a step: where children start, the step
    lock, the run's windows, scopes and tasks, and how a token moves on, the run settles or
    ends."""

    @property
    def host(self) -> RunHost: ...

    @property
    def flow(self) -> Flow: ...

    @property
    def merger(self) -> StateMerger: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def starting(self) -> set[str]: ...

    @property
    def running(self) -> Running: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...

    @property
    def task_steps(self) -> TaskSteps: ...

    @property
    def settler(self) -> DrainPort: ...


class ChildRuns:
    """Starts and awaits the run's child runs through ``ex``; drives a subflow's token."""

    def __init__(self, ex: ChildRunHost) -> None:
        self.ex = ex
        self.waits: dict[str, ChildWait] = {}
        """By subflow token id: the tokens whose child waits parked (see :class:`ChildWait`)."""

    def waiting_tasks(self) -> set[asyncio.Future[Any] | None]:
        """The tasks that only wait for a child that waits parked."""
        return {w.task for w in self.waits.values()}

    def parked(self) -> list[ParkedToken]:
        """The parked tokens of the children that wait parked (each with the run it is in)."""
        return [p for w in self.waits.values() for p in w.parked]

    async def at_subflow(self, token: TokenRecord, p: Subflow) -> TokenRecord | None:
        """Drive ``token`` at subflow ``p``: start its child run, wait for its end, move on.
        A token restored running here (its run rebuilt: see ``RunExecutor.resume_tokens``)
        waits again for the child it started, with the window and timers it was armed with."""
        ex = self.ex
        settings = ex.plan.settings[p.id]
        rejoining = token.status is S.RUNNING
        if not rejoining and not await self._start(token, p, settings):
            return None
        base = dict(ex.view.state)
        child_id = child_run_id(ex.view.run.id, token.id, p.id, token.visit, token.attempt)
        attempt, result = await self.run_child(
            p.id,
            p.flow,
            map_input(base, p.input),
            settings,
            key=token.id,
            child_id=child_id,
            item=None,
            token=token,
            deadline=token.deadline,
        )
        if rejoining and result is None and attempt.kind in ("timeout", "cancelled"):
            # Its window ended, or an interrupting timer fired, while nobody held this run: the
            # child it started goes too, wherever it is driven.
            why = attempt.cancellation.reason if attempt.cancellation else CancelReason.NODE_TIMEOUT
            await ex.host.cancel_children([child_id], f"its parent's {why.value}")
        if isinstance(attempt.error, RecursionDepthError) and "error" in p.route_map():
            # The child could not start: routed like any failure of the child.
            error = ex.error_data(attempt.error)
            ex.view.last_placements = [p.id]
            return (
                await ex.move(
                    Move(token, p, "error", event=lambda to: NodeFailed(error=error, to=to))
                )
            ).next
        if attempt.kind != "ok" or result is None:
            return await ex.task_steps.after_attempt(token, p, p.flow, settings, base, attempt)
        return await self._child_ended(token, p, base, result)

    async def _start(self, token: TokenRecord, p: Subflow, settings: NodeSettings) -> bool:
        """The step that starts ``token`` at ``p``: running, its window and timers armed (each a
        due entry of the run: they come on time with nobody holding it); False if skipped."""
        ex = self.ex
        async with ex.steps.hold():
            if ex.view.end is not None or token.status is S.CANCELLED:
                return False
            token.status = S.RUNNING
            ex.starting.add(token.id)
            anchors, due = ex.arming.arm(token, p.id, settings, ex.clock.now())
            deadline = isoformat(token.deadline) if token.deadline is not None else None
            if token.deadline is not None:
                due = [*due, TIMEOUT.entry(token.deadline, ex.view.run.id, token.id)]
            started = ex.event(
                token,
                NodeStarted(visit=token.visit, kind="subflow", deadline=deadline, subflow=p.flow),
            )
            return await ex.commit(
                Commit(ex.view.run.id, tokens=[token], events=[started], anchors=anchors, due=due),
                unless_ended=True,
            )

    async def _child_ended(
        self, token: TokenRecord, p: Subflow, base: Mapping[str, Any], result: RunResult
    ) -> TokenRecord | None:
        """Move ``token`` on by how its child run ended (or fail the run, unrouted)."""
        ex = self.ex
        completed = result.lifecycle is Lifecycle.COMPLETED

        def fin(to: list[str] | None) -> SubflowFinished:
            return SubflowFinished(
                child=result.run_id,
                lifecycle=result.lifecycle.value,
                outcome=result.outcome,
                output="success" if completed else "error",
                to=to,
            )

        if completed:
            update = map_output(result.state, p.output, ex.view.state)
            ex.view.last_placements = [p.id]
            return (
                await ex.move(
                    Move(
                        token,
                        p,
                        "success",
                        event=fin,
                        update=lambda: ex.merger.apply(ex.view.state, base, {}, [], update),
                        due_cleared=[token.id],  # (its window, timers, its child's wake)
                    )
                )
            ).next
        if "error" in p.route_map():
            ex.view.last_placements = [p.id]
            return (await ex.move(Move(token, p, "error", event=fin, due_cleared=[token.id]))).next
        await ex.commit(
            Commit(ex.view.run.id, events=[ex.event(token, fin(None))]), unless_ended=True
        )
        message = result.errors[0].message if result.errors else result.lifecycle.value
        own = SubflowFailedError(p.id, result.run_id, result.lifecycle.value, message)
        token.status = S.FAILED
        ex.view.tokens.pop(token.id, None)
        ex.request_end(Lifecycle.FAILED, [*result.errors, ex.error_info(own, p.id)])
        return None

    async def run_child(
        self,
        placement: str,
        flow_id: str,
        state: dict[str, Any],
        settings: NodeSettings,
        *,
        key: str,
        child_id: str,
        item: Any,
        token: TokenRecord | None,
        parent: CancelScope | None = None,
        deadline: datetime | None = COMPUTE,
    ) -> tuple[Attempt, RunResult | None]:
        """Run ``flow_id`` as a child run in a child scope bounded by ``settings``' window
        (``deadline``: already resolved by the caller). ``child_id``: the child's id, derived
        from where it is started (:func:`~flowtide.engine.run.children.child_run_id`), so that a
        start made again after a crash waits for the child it had started."""
        ex = self.ex
        depth = ex.view.run.depth + 1
        if depth > ex.flow.max_depth:
            err = RecursionDepthError(placement, flow_id, ex.flow.max_depth)
            return Attempt("error", error=err), None
        now = ex.clock.now()
        if token is not None and ex.token_attempts.interrupted_before_start(token):
            cancelled = Cancellation(CancelReason.TIMER, now, placement)
            return Attempt("cancelled", cancellation=cancelled), None
        if deadline is COMPUTE:
            deadline = attempt_deadline(settings, now=now, run_created_at=ex.view.run.created_at)
        if deadline is not None and deadline <= now:
            return Attempt("timeout", deadline=deadline), None
        scope = (parent or ex.root).child(placement)
        window = ScopeDeadline(ex.clock, scope, deadline)
        ex.running[key] = (placement, scope)
        try:
            child = await ex.host.start_child(
                ex.view.run, flow_id, state, scope, token, item, child_id
            )
            if token is not None and child.created:
                await ex.commit(
                    Commit(
                        ex.view.run.id,
                        events=[ex.event(token, SubflowStarted(child=child_id))],
                    ),
                    unless_ended=True,
                )
            result = await self._child_end(child, token, scope)
        except Exception as exc:
            if (down := unavailable(ex.view.run.id, exc)) is not None:
                raise down from exc  # (the store's, not the child's: this run is let go)
            return Attempt("error", error=exc), None
        finally:
            window.disarm()
            scope.close()
            ex.running.pop(key, None)
        if scope.cancellation is not None:
            if window.fired:
                return Attempt("timeout", deadline=deadline), result
            return Attempt("cancelled", cancellation=scope.cancellation), result
        return Attempt("ok", output="success"), result

    async def _child_end(
        self, child: StartedChild, token: TokenRecord | None, scope: CancelScope
    ) -> RunResult:
        """The child's end. Meanwhile, once a subflow's child waits parked, this run counts
        the subflow's token as parked (see
        :class:`ChildWait`): it may settle parked and be
        let go, this wait with it; the child's end then wakes it from the store."""
        ended = asyncio.ensure_future(child.ended())
        if token is None:  # (a scatter's item: the scatter's own token is at work)
            return await ended
        waits = self.waits
        settled = asyncio.ensure_future(child.settled())

        # Once its scope is cancelled (a timer, the window, the run's end) the token is at work
        # again: its child is being cancelled, and the token moves on by that.
        def at_work(_: Cancellation) -> None:
            waits.pop(token.id, None)

        scope.on_cancel(at_work)
        try:
            await asyncio.wait({ended, settled}, return_when=asyncio.FIRST_COMPLETED)
            parked = settled.result() if settled.done() and not settled.exception() else None
            if scope.cancel_called:
                parked = None
            if not ended.done() and parked is not None and parked.lifecycle is Lifecycle.PARKED:
                waits[token.id] = ChildWait(
                    asyncio.current_task(),
                    tuple(replace(p, run_id=p.run_id or child.run.id) for p in parked.parked),
                )
                self.ex.settler.maybe_drained()
            return await ended
        finally:
            waits.pop(token.id, None)
            for fut in (ended, settled):
                if not fut.done():
                    fut.cancel()


def map_input(state: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    """A child's state: a copy of ``state``, or only the mapped paths (child <- parent)."""
    if not mapping:
        return copy_state(state)
    out: dict[str, Any] = {}
    for child_path, parent_path in mapping.items():
        set_path(out, child_path, copy_state({"v": get_path(state, parent_path)})["v"])
    return out


def map_output(
    child: Mapping[str, Any], mapping: Mapping[str, str], parent: Mapping[str, Any]
) -> dict[str, Any]:
    """Top-level parent keys to set from a child's final state (parent path <- child path)."""
    out: dict[str, Any] = {}
    for parent_path, child_path in mapping.items():
        value = get_path(child, child_path)
        head, _, rest = parent_path.partition(".")
        if rest:
            if head not in out:
                current = parent.get(head)
                out[head] = copy_state(current) if isinstance(current, dict) else {}
            set_path(out[head], rest, value)
        else:
            out[head] = value
    return out
