"""Child runs (subflow placements and scatter bodies that are flows) and pre and post phases."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from flowtide.clock import isoformat
from flowtide.engine.children import StartedChild, child_run_id
from flowtide.engine.deadlines import (
    attempt_deadline,
)
from flowtide.engine.errors import (
    NodeTimeoutError,
    PrePhaseError,
    RecursionDepthError,
    SubflowFailedError,
)
from flowtide.engine.event_types import (
    NodeFailed,
    NodeFinished,
    NodeStarted,
    SubflowFinished,
    SubflowStarted,
)
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.paths import get_path, set_path
from flowtide.engine.reducers import copy_state
from flowtide.engine.result import ErrorInfo, RunResult
from flowtide.engine.run.attempts import COMPUTE, Attempt, AttemptCall
from flowtide.engine.run.executor.core import ChildWait
from flowtide.engine.run.executor.parking import Parking
from flowtide.engine.run.executor.records import timed_out
from flowtide.engine.scope import Cancellation, CancelReason, CancelScope, ScopeDeadline
from flowtide.model.placements import (
    Phase,
    Subflow,
)
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    Commit,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class Subflows(Parking):
    """Child runs and phases."""

    async def at_subflow(self, token: TokenRecord, p: Subflow) -> TokenRecord | None:
        settings = self.plan.settings[p.id]
        async with self.steps.hold():
            if self.view.end is not None or token.status is S.CANCELLED:
                return None
            token.status = S.RUNNING
            self.starting.add(token.id)
            anchors, due = self.arm(token, p.id, settings, self.clock.now())
            deadline = isoformat(token.deadline) if token.deadline is not None else None
            started = self.event(
                token,
                NodeStarted(visit=token.visit, kind="subflow", deadline=deadline, subflow=p.flow),
            )
            if not await self.commit(
                Commit(
                    self.view.run.id, tokens=[token], events=[started], anchors=anchors, due=due
                ),
                unless_ended=True,
            ):
                return None
        base = dict(self.view.state)
        child_state = map_input(base, p.input)
        attempt, result = await self.run_child(
            p.id,
            p.flow,
            child_state,
            settings,
            key=token.id,
            child_id=child_run_id(self.view.run.id, token.id, token.visit, token.attempt),
            item=None,
            token=token,
            deadline=token.deadline,
        )
        if isinstance(attempt.error, RecursionDepthError) and "error" in p.route_map():
            # The child could not start: routed like any failure of the child.
            error = self.error_data(attempt.error)
            self.view.last_placements = [p.id]
            return (
                await self.move(token, p, "error", event=lambda to: NodeFailed(error=error, to=to))
            ).next
        if attempt.kind != "ok" or result is None:
            return await self.after_attempt(token, p, p.flow, settings, base, attempt)
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
            update = map_output(result.state, p.output, self.view.state)
            self.view.last_placements = [p.id]
            return (
                await self.move(
                    token,
                    p,
                    "success",
                    event=fin,
                    update=lambda: self.merger.apply(self.view.state, base, {}, [], update),
                )
            ).next
        if "error" in p.route_map():
            self.view.last_placements = [p.id]
            return (await self.move(token, p, "error", event=fin)).next
        await self.commit(
            Commit(self.view.run.id, events=[self.event(token, fin(None))]), unless_ended=True
        )
        message = result.errors[0].message if result.errors else result.lifecycle.value
        own = SubflowFailedError(p.id, result.run_id, result.lifecycle.value, message)
        token.status = S.FAILED
        self.view.tokens.pop(token.id, None)
        self.request_end(Lifecycle.FAILED, [*result.errors, self.error_info(own, p.id)])
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
        from where it is started (:func:`~flowtide.engine.children.child_run_id`), so that a
        start made again after a crash waits for the child it had started."""
        depth = self.view.run.depth + 1
        if depth > self.flow.max_depth:
            err = RecursionDepthError(placement, flow_id, self.flow.max_depth)
            return Attempt("error", error=err), None
        now = self.clock.now()
        if token is not None and self.interrupted_before_start(token):
            cancelled = Cancellation(CancelReason.TIMER, now, placement)
            return Attempt("cancelled", cancellation=cancelled), None
        if deadline is COMPUTE:
            deadline = attempt_deadline(settings, now=now, run_created_at=self.view.run.created_at)
        if deadline is not None and deadline <= now:
            return Attempt("timeout", deadline=deadline), None
        scope = (parent or self.root).child(placement)
        window = ScopeDeadline(self.clock, scope, deadline)
        self.running[key] = (placement, scope)
        run_id = child_id
        try:
            child = await self.host.start_child(
                self.view.run, flow_id, state, scope, token, item, run_id
            )
            if token is not None and child.created:
                await self.commit(
                    Commit(
                        self.view.run.id,
                        events=[self.event(token, SubflowStarted(child=run_id))],
                    ),
                    unless_ended=True,
                )
            result = await self._child_end(child, token)
        except Exception as exc:
            return Attempt("error", error=exc), None
        finally:
            window.disarm()
            scope.close()
            self.running.pop(key, None)
        if scope.cancellation is not None:
            if window.fired:
                return Attempt("timeout", deadline=deadline), result
            return Attempt("cancelled", cancellation=scope.cancellation), result
        return Attempt("ok", output="success"), result

    async def _child_end(self, child: StartedChild, token: TokenRecord | None) -> RunResult:
        """The child's end. Meanwhile, once a subflow's child waits parked, this run counts
        the subflow's token as parked (and may settle parked itself, held: see
        :attr:`child_waits`)."""
        ended = asyncio.ensure_future(child.ended())
        if token is None:  # (a scatter's item: the scatter's own token is at work)
            return await ended
        settled = asyncio.ensure_future(child.settled())
        try:
            await asyncio.wait({ended, settled}, return_when=asyncio.FIRST_COMPLETED)
            parked = settled.result() if settled.done() and not settled.exception() else None
            if not ended.done() and parked is not None and parked.lifecycle is Lifecycle.PARKED:
                self.child_waits[token.id] = ChildWait(
                    asyncio.current_task(),
                    tuple(replace(p, run_id=p.run_id or child.run.id) for p in parked.parked),
                )
                self.maybe_drained()
            return await ended
        finally:
            self.child_waits.pop(token.id, None)
            for fut in (ended, settled):
                if not fut.done():
                    fut.cancel()

    async def run_phase(self, phase: Phase, *, post: bool = False) -> ErrorInfo | None:
        impl = self.code.impls[phase.id]
        settings = self.plan.settings[phase.id]
        token = TokenRecord(
            id=f"{self.view.run.id}.{next(self.ids)}",
            run_id=self.view.run.id,
            placement=phase.id,
            status=S.RUNNING,
            visit=self.next_visit(phase.id),
            created_at=self.clock.now(),
        )
        base = dict(self.view.state)
        token.deadline = attempt_deadline(
            settings, now=self.clock.now(), run_created_at=self.view.run.created_at
        )
        await self.commit(
            Commit(
                self.view.run.id,
                tokens=[token],
                events=[
                    self.event(
                        token,
                        NodeStarted(
                            visit=token.visit,
                            kind="phase",
                            deadline=isoformat(token.deadline) if token.deadline else None,
                            node=impl.id,
                            phase=phase.phase.value,
                        ),
                    )
                ],
            )
        )
        scope = CancelScope(None) if post else self.root
        call = AttemptCall(
            impl=impl,
            settings=settings,
            placement=phase.id,
            state=base,
            parent=scope,
            key=token.id,
            attempt=1,
            visit=token.visit,
            deadline=token.deadline,  # (the window its start announced)
        )
        attempt = await self.invoke(call, token)
        token.status = S.DONE
        if attempt.kind == "ok":
            assert attempt.output is not None
            written, removed = self.state_update(base, attempt)
            await self.commit(
                Commit(
                    self.view.run.id,
                    tokens=[token],
                    state=written or None,
                    state_deleted=removed,
                    events=[self.event(token, NodeFinished(output=attempt.output))],
                )
            )
            return None
        if attempt.kind == "cancelled":
            return None
        token.status = S.FAILED
        if attempt.kind == "timeout":
            assert settings.timeout is not None
            exc: BaseException = NodeTimeoutError(impl.id, phase.id, settings.timeout)
            ev = self.event(token, timed_out(settings.timeout, attempt.deadline, routed=False))
        else:
            assert attempt.error is not None
            exc = attempt.error
            ev = self.event(token, NodeFailed(error=self.error_data(exc)))
        await self.commit(Commit(self.view.run.id, tokens=[token], events=[ev]))
        if post:
            return self.error_info(exc, phase.id)
        info = self.error_info(exc, phase.id)
        pre = PrePhaseError(phase.id, f"{info.type}: {info.message}")
        return replace(info, message=str(pre))


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
