"""The host an engine gives each of its run executors
(:class:`~flowtide.engine.worker._host.RunHost`).

Its services (store, clock, worker threads, limits) are read from the engine as they are at the
time, and what the executors tell it goes to the engine's bookkeeping, which the engine hands
over as callables (:class:`Bookkeeping`): the host knows nothing else of the engine.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine.errors import EngineError
from flowtide.engine.flows.contracts import OutputContracts
from flowtide.engine.redaction import Redact
from flowtide.engine.result import RunResult
from flowtide.engine.run.children import StartedChild
from flowtide.engine.timing.scope import CancelScope
from flowtide.engine.worker.instruments import EngineInstruments
from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.store.base import (
    EventRecord,
    RunRecord,
    Store,
    StoreError,
    TokenRecord,
    UnknownRunError,
)

__all__ = ["Bookkeeping", "EngineHost", "HostedEngine"]

StartChild = Callable[
    [RunRecord, str, dict[str, Any], CancelScope, TokenRecord | None, Any, str],
    Awaitable[StartedChild],
]


class HostedEngine(Protocol):
    """What the host reads of its engine (public attributes, read when asked: a test may give an
    engine another clock)."""

    store: Store
    clock: Clock
    random: random.Random | None
    executes: bool
    max_value_bytes: int | None
    redact: Redact | None
    instruments: EngineInstruments

    @property
    def threads(self) -> NodeThreads: ...

    async def cancel(
        self, run_id: str, reason: str | None = None, *, wait: float | None = 10.0
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class Bookkeeping:
    """What the engine does when one of its executors tells it something (see
    :class:`~flowtide.engine.worker._host.RunHost` for each)."""

    thread_slots: ThreadSlots
    output_contracts: OutputContracts | None
    wake_sweeper: Callable[[datetime | None], None]
    publish: Callable[[Sequence[EventRecord]], None]
    start_child: StartChild
    let_go: Callable[[object], None]
    discard: Callable[[object], None]
    defer: Callable[[object, timedelta], None]
    forget: Callable[[object], None]
    unavailable: Callable[[object, Exception], None]
    settled: Callable[[RunResult], None]
    ended: Callable[[RunResult], None]


class EngineHost:
    """A :class:`~flowtide.engine.worker._host.RunHost` over an engine and its bookkeeping."""

    def __init__(self, engine: HostedEngine, books: Bookkeeping) -> None:
        self._engine = engine
        self._books = books

    @property
    def store(self) -> Store:
        return self._engine.store

    @property
    def clock(self) -> Clock:
        return self._engine.clock

    @property
    def random(self) -> random.Random | None:
        return self._engine.random

    @property
    def threads(self) -> NodeThreads:
        return self._engine.threads

    @property
    def executes(self) -> bool:
        return self._engine.executes

    @property
    def max_value_bytes(self) -> int | None:
        return self._engine.max_value_bytes

    @property
    def redact(self) -> Redact | None:
        return self._engine.redact

    @property
    def instruments(self) -> EngineInstruments:
        return self._engine.instruments

    @property
    def thread_slots(self) -> ThreadSlots:
        return self._books.thread_slots

    @property
    def output_contracts(self) -> OutputContracts | None:
        return self._books.output_contracts

    def wake_sweeper(self, when: datetime | None = None) -> None:
        self._books.wake_sweeper(when)

    def publish(self, events: Sequence[EventRecord]) -> None:
        self._books.publish(events)

    async def start_child(
        self,
        parent: RunRecord,
        flow_id: str,
        state: dict[str, Any],
        scope: CancelScope,
        token: TokenRecord | None,
        item: Any,
        run_id: str,
    ) -> StartedChild:
        return await self._books.start_child(parent, flow_id, state, scope, token, item, run_id)

    async def cancel_children(self, run_ids: Sequence[str], reason: str) -> None:
        for run_id in run_ids:
            # (Never started, or the store is down: its own deadline, or an operator, ends it.)
            with contextlib.suppress(UnknownRunError, StoreError, EngineError):
                # (Recorded for its holder when it is not held here: not waited for.)
                await self._engine.cancel(run_id, reason, wait=0)

    def let_go(self, executor: object) -> None:
        self._books.let_go(executor)

    def discard(self, executor: object) -> None:
        self._books.discard(executor)

    def defer(self, executor: object, delay: timedelta) -> None:
        self._books.defer(executor, delay)

    def forget(self, executor: object) -> None:
        self._books.forget(executor)

    def unavailable(self, executor: object, error: Exception) -> None:
        self._books.unavailable(executor, error)

    def settled(self, result: RunResult) -> None:
        self._books.settled(result)

    def ended(self, result: RunResult) -> None:
        self._books.ended(result)
