"""What a caller holds of a run it started (:class:`RunHandle`) and of a signal it sent
(:class:`SignalReceipt`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from flowtide.engine.result import RunResult

__all__ = ["RunHandle", "SignalReceipt"]


class _Cancels(Protocol):
    def cancel_nowait(self, run_id: str, reason: str | None = None) -> bool: ...


class RunHandle:
    """A started run: its id, its end (awaitable) and a way to cancel it."""

    def __init__(self, engine: _Cancels, run_id: str, end: asyncio.Future[RunResult]) -> None:
        self._engine = engine
        self._run_id = run_id
        self._end = end

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def done(self) -> bool:
        """The run has ended."""
        return self._end.done()

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel the run (lifecycle ``cancelled``); False if it had already ended.

        A run this engine does not hold (let go, parked, or held elsewhere) is cancelled by a
        request its holder, or the next worker to take it, applies.
        """
        if self._end.done():
            return False
        return self._engine.cancel_nowait(self._run_id, reason)

    async def result(self) -> RunResult:
        """The run's result once it has ended (it may park and be signalled on the way)."""
        return await asyncio.shield(self._end)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"


@dataclass(frozen=True, slots=True)
class SignalReceipt:
    """The answer to an accepted signal (``duplicate``: an earlier signal with the same
    idempotency key had it; nothing changed this time)."""

    run_id: str
    token_id: str
    placement: str
    output: str | None
    at: datetime
    park: str
    idempotency_key: str | None = None
    duplicate: bool = False

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any], *, duplicate: bool = False) -> SignalReceipt:
        return cls(
            answer["run_id"],
            answer["token_id"],
            answer["placement"],
            answer.get("output"),
            datetime.fromisoformat(answer["at"]),
            answer["park"],
            answer.get("idempotency_key"),
            duplicate,
        )
