"""What a run executor needs from the engine that holds it.

The engine gives each executor a host: the store, the clock, where sync nodes run, the sweeper
to wake, the hooks, and the engine's bookkeeping of the runs it holds. The executor knows the
engine only through this protocol.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine.flows.contracts import OutputContracts
from flowtide.engine.redaction import Redact
from flowtide.engine.result import RunResult
from flowtide.engine.run.children import StartedChild
from flowtide.engine.timing.scope import CancelScope
from flowtide.engine.worker.instruments import EngineInstruments
from flowtide.engine.worker.nodethreads import NodeThreads
from flowtide.engine.worker.threadslots import ThreadSlots
from flowtide.store.base import EventRecord, RunRecord, Store, TokenRecord


class RunHost(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def random(self) -> random.Random | None:
        """The random source of jittered backoffs (None: the module's)."""

    @property
    def threads(self) -> NodeThreads:
        """Where sync nodes run."""

    @property
    def thread_slots(self) -> ThreadSlots:
        """One per worker thread: a sync node's attempt takes one before it starts."""

    @property
    def output_contracts(self) -> OutputContracts | None:
        """The output schemas to check outputs against (None: not checked)."""

    @property
    def max_value_bytes(self) -> int | None:
        """The largest a state value or park payload may be, as JSON (None: no limit)."""

    @property
    def redact(self) -> Redact | None:
        """The redaction hook errors go through before they are recorded (None: the process's
        registered one, if any; see :mod:`flowtide.engine.redaction`)."""

    @property
    def executes(self) -> bool:
        """Whether this engine runs nodes. One that does not (a client: it starts, signals and
        cancels runs) gives a run back to the store as soon as a token of it is ready, for a
        worker to take."""

    @property
    def instruments(self) -> EngineInstruments:
        """Where the executor reports its commits' latency and its attempts' duration."""

    def wake_sweeper(self, when: datetime | None = None) -> None:
        """A due instant was written: the sweeper looks again (by ``when`` at the latest)."""

    def publish(self, events: Sequence[EventRecord]) -> None:
        """Committed events, for the hooks (delivered in order, outside the run's steps)."""

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
        """Child run ``run_id`` of ``parent``: created and started in ``scope``, or found
        again if it was started before (see :mod:`flowtide.engine.run.children`)."""

    async def cancel_children(self, run_ids: Sequence[str], reason: str) -> None:
        """Cancel these child runs, wherever they are driven (those that exist and have not
        ended)."""

    def let_go(self, executor: object) -> None:
        """The run is quiescent: nothing of it stays in memory."""

    def defer(self, executor: object, delay: timedelta) -> None:
        """Like :meth:`discard`, and nobody takes the run again for ``delay``."""

    def discard(self, executor: object) -> None:
        """What this executor knows is stale (another actor moved the run): drop it."""

    def unavailable(self, executor: object, error: Exception) -> None:
        """The store kept failing: drop the executor; whoever waits on the run gets ``error``
        (the run stays in the store as it was, to be resumed)."""

    def forget(self, executor: object) -> None:
        """The run has ended: the engine stops holding it."""

    def settled(self, result: RunResult) -> None:
        """The run reached a quiescent point."""

    def ended(self, result: RunResult) -> None:
        """The run ended with ``result``."""
