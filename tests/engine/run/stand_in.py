"""What every composed part of the executor calls back on it (``StepPort``), as a stand-in for
the parts' own tests: events made on a virtual clock, commits recorded, not sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flowtide.clock import VirtualClock
from flowtide.engine.event_data import event_record
from flowtide.engine.event_types import ErrorData, EventPayload, error_data
from flowtide.engine.result import ErrorInfo
from flowtide.engine.run.view import RunView
from flowtide.engine.timing.scope import CancelScope
from flowtide.store.base import Commit, EventRecord, TokenRecord


class RecordedSteps:
    """The run's view, a virtual clock at ``now``, a root scope, and the commits asked for."""

    def __init__(self, view: RunView, now: datetime) -> None:
        self.view = view
        self.clock = VirtualClock(now)
        self.root = CancelScope(None)
        self.commits: list[Commit] = []

    def event(
        self,
        token: TokenRecord | None,
        payload: EventPayload,
        *,
        placement: str | None = None,
        attempt: int | None = None,
    ) -> EventRecord:
        return event_record(payload, self.view.run.id, self.clock.now(), placement=placement)

    def error_info(self, exc: BaseException, placement: str | None = None) -> ErrorInfo:
        return ErrorInfo.of(exc, placement)

    def error_data(self, exc: BaseException) -> ErrorData:
        return error_data(exc, None)

    async def commit(
        self,
        c: Commit,
        *,
        unless_ended: bool = False,
        token: TokenRecord | None = None,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
    ) -> bool:
        self.commits.append(c)
        return True
