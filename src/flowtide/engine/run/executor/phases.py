"""A run's pre and post phases: each one attempt of its node, recorded as a token of its own."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Protocol

from flowtide.clock import isoformat
from flowtide.engine.errors import NodeTimeoutError, PrePhaseError
from flowtide.engine.event_types import NodeFailed, NodeFinished, NodeStarted
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.result import ErrorInfo
from flowtide.engine.run.attempts import AttemptCall
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.ports import StepPort
from flowtide.engine.run.executor.records import timed_out
from flowtide.engine.timing.deadlines import attempt_deadline
from flowtide.engine.timing.scope import CancelScope
from flowtide.model.placements import Phase
from flowtide.store.base import Commit, TokenRecord, TokenStatus

S = TokenStatus


class PhaseHost(StepPort, Protocol):
    """What running a phase needs of the executor besides a step: the node code, token ids and
    visits, and its node's attempts."""

    @property
    def code(self) -> FlowCode: ...

    @property
    def ids(self) -> itertools.count[int]: ...

    def next_visit(self, placement: str) -> int: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...


class Phases:
    """Runs a run's phases through ``ex``."""

    def __init__(self, ex: PhaseHost) -> None:
        self.ex = ex

    async def run(self, phase: Phase, *, post: bool = False) -> ErrorInfo | None:
        """Run ``phase`` once; the error that ends the run if it failed, else None."""
        ex = self.ex
        impl = ex.code.impls[phase.id]
        settings = ex.plan.settings[phase.id]
        run = ex.view.run
        token = TokenRecord(
            id=f"{run.id}.{next(ex.ids)}",
            run_id=run.id,
            placement=phase.id,
            status=S.RUNNING,
            visit=ex.next_visit(phase.id),
            created_at=ex.clock.now(),
        )
        base = dict(ex.view.state)
        token.deadline = attempt_deadline(
            settings, now=ex.clock.now(), run_created_at=run.created_at
        )
        started = NodeStarted(
            visit=token.visit,
            kind="phase",
            deadline=isoformat(token.deadline) if token.deadline else None,
            node=impl.id,
            phase=phase.phase.value,
        )
        await ex.commit(Commit(run.id, tokens=[token], events=[ex.event(token, started)]))
        # A post phase runs after the run's root scope is cancelled: a scope of its own.
        scope = CancelScope(None) if post else ex.root
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
        attempt = await ex.token_attempts.invoke(call, token)
        token.status = S.DONE
        if attempt.kind == "ok":
            assert attempt.output is not None
            written, removed = ex.token_attempts.state_update(base, attempt)
            await ex.commit(
                Commit(
                    run.id,
                    tokens=[token],
                    state=written or None,
                    state_deleted=removed,
                    events=[ex.event(token, NodeFinished(output=attempt.output))],
                )
            )
            return None
        if attempt.kind == "cancelled":
            return None
        token.status = S.FAILED
        if attempt.kind == "timeout":
            assert settings.timeout is not None
            exc: BaseException = NodeTimeoutError(impl.id, phase.id, settings.timeout)
            ev = ex.event(token, timed_out(settings.timeout, attempt.deadline, routed=False))
        else:
            assert attempt.error is not None
            exc = attempt.error
            ev = ex.event(token, NodeFailed(error=ex.error_data(exc)))
        await ex.commit(Commit(run.id, tokens=[token], events=[ev]))
        info = ex.error_info(exc, phase.id)
        if post:
            return info
        pre = PrePhaseError(phase.id, f"{info.type}: {info.message}")
        return replace(info, message=str(pre))
