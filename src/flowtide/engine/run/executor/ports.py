"""What the executor's composed parts call back on it: its view of the run and its one way to
commit a step (the operations every part needs; each part's own protocol adds the rest), and
how a part moves a token on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine.event_types import ErrorData, EventPayload
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ErrorInfo, InterruptedAt
from flowtide.engine.run.move import Move, Moved
from flowtide.engine.run.view import RunView
from flowtide.engine.timing.scope import CancelReason, CancelScope
from flowtide.store.base import Commit, EventRecord, TokenRecord


class StepPort(Protocol):
    """The run's data, clock and plan, its root scope, and how a step is recorded."""

    @property
    def view(self) -> RunView: ...

    @property
    def plan(self) -> FlowPlan: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def root(self) -> CancelScope: ...

    def event(
        self,
        token: TokenRecord | None,
        payload: EventPayload,
        *,
        placement: str | None = None,
        attempt: int | None = None,
    ) -> EventRecord: ...

    def error_info(self, exc: BaseException, placement: str | None = None) -> ErrorInfo: ...

    def error_data(self, exc: BaseException) -> ErrorData: ...

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        last: bool = False,
    ) -> bool: ...


class MovePort(Protocol):
    """Moves a token along an output, one step (see :meth:`Router.move
    <flowtide.engine.run.executor.router.Router.move>`). The executor's ``move`` also fires the
    join groups the move made ready, in the same step; the router's own leaves that to its
    caller (:attr:`Moved.joins_due <flowtide.engine.run.move.Moved.joins_due>`)."""

    async def move(self, m: Move) -> Moved: ...


class DrainPort(Protocol):
    """Settles or ends the run if nothing drives it any more (see :meth:`Settling.maybe_drained
    <flowtide.engine.run.executor.settling.Settling.maybe_drained>`): a part whose token stops
    being at work says so."""

    def maybe_drained(self) -> None: ...


class EndPort(Protocol):
    """Ends the run (see :meth:`RunExecutor.request_end
    <flowtide.engine.run.executor.core.RunExecutor.request_end>`): a part that fails a token or
    finds the run over asks for its end, which the executor's driver carries out."""

    def request_end(
        self,
        lifecycle: Lifecycle,
        errors: Sequence[ErrorInfo] = (),
        interrupted: InterruptedAt | None = None,
        *,
        cancel_reason: CancelReason | None = CancelReason.RUN_ENDED,
    ) -> None: ...
