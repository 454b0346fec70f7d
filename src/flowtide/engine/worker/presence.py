"""What an executing engine says and records about itself: one log line per run it takes,
parks, ends or gives back (INFO on ``flowtide.engine``; nothing per step), one warning per run
it cannot drive, naming the nodes it lacks, and its heartbeat in the store
(:mod:`flowtide.engine.worker.heartbeat`), which names those runs for clients to show. It also sees
the engine's held runs settle, for :meth:`Presence.drained`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from flowtide.authoring.nodes import NodeRegistry
from flowtide.authoring.nodes import registry as default_registry
from flowtide.clock import Clock, VirtualClock
from flowtide.engine.flows.missing import MissingNodes
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.worker.heartbeat import Heartbeat
from flowtide.engine.worker.leases import SetAside, short_id
from flowtide.errors import NodeResolutionError
from flowtide.model.flow import Flow
from flowtide.printable import printable
from flowtide.store.base import Lease, RunRecord, Store

__all__ = ["Presence", "PresenceHost"]

log = logging.getLogger("flowtide.engine")


class PresenceHost(Protocol):
    """What the presence sees of its engine."""

    store: Store
    clock: Clock
    owner: str
    lease_ttl: timedelta
    executes: bool
    registry: NodeRegistry | None

    def flow(self, flow_id: str) -> Flow: ...
    def resolve(self, ref: str) -> object: ...
    def held_runs(self) -> list[str]: ...


class Held(Protocol):
    """A held run's executor, as the presence sees it."""

    @property
    def run(self) -> RunRecord: ...


class Presence:
    """The log lines, set-aside runs and heartbeat of ``engine`` (``defer``: how long a run it
    cannot drive is set aside; ``heartbeat``: record one, by default when the engine executes
    on a clock that is not virtual)."""

    def __init__(self, engine: PresenceHost, defer: timedelta, heartbeat: bool | None) -> None:
        store, clock, owner, ttl = engine.store, engine.clock, engine.owner, engine.lease_ttl
        if heartbeat is None:
            heartbeat = engine.executes and not isinstance(clock, VirtualClock)
        self._clock = clock
        self.aside = SetAside(store, clock, owner, defer)
        self._missing = MissingNodes(store, engine.flow, engine.resolve)
        keep = 2 * defer + ttl  # (a run still set aside is set aside again by then)

        def nodes() -> list[str]:
            return [*(engine.registry or ()), *default_registry]

        beat = Heartbeat(store, clock, owner, ttl, lambda: len(engine.held_runs()), nodes, keep)
        self.heartbeat = beat if heartbeat else None
        self.changed = asyncio.Event()
        """Set each time a held run settles or is let go of."""

    def start(
        self,
        take: Callable[[Sequence[Lease], datetime], Awaitable[object]],
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """The engine takes runs from now on (``take``: those it takes over): it beats
        (``before``: awaited before each beat)."""
        if self.heartbeat is not None:
            self.heartbeat.adopt = take
            self.heartbeat.before = before
            self.heartbeat.start()

    async def stop(self) -> None:
        if self.heartbeat is not None:
            await self.heartbeat.stop()

    def took(self, run_id: str, flow_id: str) -> None:
        log.info("took run %s (flow %s)", short_id(run_id), printable(flow_id))
        if self.heartbeat is not None:
            self.heartbeat.drives(run_id)

    def let_go(self, run: RunRecord) -> None:
        if run.lifecycle == Lifecycle.PARKED:
            log.info(
                "run %s (flow %s) parked: given back", short_id(run.id), printable(run.flow_id)
            )
        else:
            log.info(
                "run %s (flow %s) handed back to a worker", short_id(run.id), printable(run.flow_id)
            )

    def ended(self, run: RunRecord) -> None:
        """The run's executor is done; if the run has ended (else another actor ended it)."""
        if Lifecycle(run.lifecycle).terminal:
            how = f"{run.lifecycle} ({run.outcome})" if run.outcome else run.lifecycle
            log.info("run %s (flow %s) ended: %s", short_id(run.id), printable(run.flow_id), how)

    def gave_back(self, run_ids: Iterable[str], why: str) -> None:
        for run_id in run_ids:
            log.info("gave back run %s (%s)", short_id(run_id), why)

    async def cannot_drive(self, run_id: str, why: Exception) -> None:
        """The run's flow or nodes do not resolve here: set it aside, say why (once), and name
        the nodes it lacks in the heartbeat."""
        missing = await self._missing.of_run(run_id) if isinstance(why, NodeResolutionError) else []
        await self.aside.put(run_id, why, missing)
        if missing and self.heartbeat is not None:
            self.heartbeat.waits(run_id, missing)

    async def drained(self, within: timedelta, held: Callable[[], Mapping[str, Held]]) -> list[str]:
        """Wait up to ``within`` (on the clock) for every run ``held()`` gives to be parked or
        let go of; the ids of those still at work then."""

        def at_work() -> list[str]:
            return [i for i, ex in held().items() if ex.run.lifecycle != Lifecycle.PARKED]

        busy = at_work()
        if not busy:
            log.info("draining: no run in flight")
            return []
        seconds = within.total_seconds()
        log.info("draining: %d run(s) in flight, up to %g s", len(busy), seconds)
        until = self._clock.now() + within
        changed = self.changed
        while busy and self._clock.now() < until:
            changed.clear()
            timer = self._clock.call_at(until, changed.set)
            try:
                await changed.wait()
            finally:
                timer.cancel()
            busy = at_work()
        if busy:
            log.warning(
                "drained for %g s: giving back %d run(s) with nodes in flight (they run again "
                "elsewhere)",
                seconds,
                len(busy),
            )
        else:
            log.info("drained: every run in flight has parked or ended")
        return busy
