"""How an engine comes to hold a run it did not create: rebuilt from the store (one read, its
snapshot) under a lease the sweeper claimed, one taken over from whoever held it, or one taken
because nobody holds the run alive; and, for a run it holds already, firing what is due.

A run is rebuilt once at a time: a second caller waits for the first one's rebuild. A run this
engine cannot drive (its flow or nodes do not resolve here) is left to a worker that can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from flowtide.clock import Clock
from flowtide.engine.errors import EngineError
from flowtide.engine.flows.catalog import FlowCatalog
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.executor.core import RunExecutor
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.holding import HeldRuns
from flowtide.engine.worker.instruments import EngineInstruments
from flowtide.engine.worker.leases import count_takeovers
from flowtide.engine.worker.presence import Presence
from flowtide.errors import NodeResolutionError
from flowtide.printable import printable
from flowtide.store.base import Lease, Store, StoreError, UnknownRunError, UnknownStoredFlow

__all__ = ["FIRE_SLICE", "RunTaking", "TakingEngine"]


class _Ended(Exception):
    """A run rebuilt to be woken had ended: there is nothing to take."""


log = logging.getLogger("flowtide.engine")

FIRE_SLICE = 50
"""How many claimed runs the engine takes before it lets the loop run other work."""


class TakingEngine(Protocol):
    """What :class:`RunTaking` reads of its engine (read when asked: a test may give an engine
    another clock)."""

    store: Store
    clock: Clock
    owner: str
    lease_ttl: timedelta
    instruments: EngineInstruments

    def code(self, plan: FlowPlan) -> FlowCode: ...


class RunTaking:
    """Takes runs into ``held``: rebuilt with ``host`` as their executors' host, their flows
    planned by ``catalog``; ``presence`` hears of each run taken or that cannot be driven."""

    def __init__(
        self,
        engine: TakingEngine,
        held: HeldRuns,
        catalog: FlowCatalog,
        host: RunHost,
        presence: Presence,
    ) -> None:
        self._engine = engine
        self._held = held
        self._runs = held.runs  # (the held runs themselves, by run id)
        self._catalog = catalog
        self._host = host
        self._presence = presence
        self._loading: dict[str, asyncio.Future[RunExecutor | None]] = {}

    async def executor(
        self, run_id: str, lease: Lease | None, now: datetime | None = None
    ) -> RunExecutor | None:
        """The run's executor: in memory, or rebuilt from the store under ``lease`` (a claim's
        or a resume's: a live holder it was taken from lets go at its next commit, see
        :meth:`Store.acquire_run`, and its nodes in flight run again), or under none (see
        :meth:`_load`); None: the run ended. A rebuilt run fires its due entries come by ``now``
        (default: the clock's now)."""
        while (loading := self._loading.get(run_id)) is not None:
            try:
                ex = await asyncio.shield(loading)
            except _Ended:
                return None
            if ex is not None or lease is None:  # (else found held, by this claim: rebuilt)
                return ex
        ex = self._runs.get(run_id)
        if ex is not None and not ex.released:
            return ex
        fut: asyncio.Future[RunExecutor | None] = asyncio.get_running_loop().create_future()
        self._loading[run_id] = fut
        try:
            try:
                ex = await self._load(run_id, lease, now or self._engine.clock.now())
            except (EngineError, StoreError, NodeResolutionError):
                if lease is not None:
                    await self._held.give_back(lease)  # (this engine cannot drive it: untouched)
                raise
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        finally:
            del self._loading[run_id]
        fut.set_result(ex)
        return ex

    async def _load(self, run_id: str, lease: Lease | None, now: datetime) -> RunExecutor | None:
        """Rebuild the run's executor from the store (one read: its snapshot), under ``lease``,
        and fire what is due by ``now``. Without (a wake's): only if nobody held the run (else
        None), its lease taken by its first commit (``Commit.take``), settled by the wake."""
        snapshot = await self._engine.store.load_run(run_id)
        run = snapshot.run
        if Lifecycle(run.lifecycle).terminal:
            if lease is None:
                raise _Ended(run_id)  # (nobody to take it from: see take_unheld)
            return None
        if lease is None and (snapshot.lease is not None or snapshot.epoch is None):
            return None  # (held, or a store that does not say by whom: taken the usual way)
        plan = await self._catalog.plan_of_run(run)
        code = self._engine.code(plan)  # (refused before anything of the run is run)
        ex = RunExecutor(self._host, plan, run, snapshot.state, code=code)
        ex.lease = lease
        if lease is None:
            ex.taking = Lease(
                run_id, self._engine.owner, (snapshot.epoch or 0) + 1, now + self._engine.lease_ttl
            )
        self._held.hold(run_id, ex)
        self._presence.took(run_id, run.flow_id)
        if run.lifecycle == Lifecycle.PENDING:
            ex.run_start.launch_stored(run.options.get("entrypoint"))
            return ex
        try:
            ex.restore(snapshot)
            ex.resume_tokens()
            ex.fire_come(snapshot.due, now)
        except BaseException:
            self._held.forget(ex)  # (its lease is given back by the caller)
            ex.close(notify=False)
            raise
        if lease is not None:  # (a wake's is settled by its unpin: no settle task made useless)
            ex.settler.maybe_drained()
        return ex

    async def _fire_due(self, ex: RunExecutor, now: datetime) -> int:
        """Fire the due entries of a run held here whose instant has come by ``now``."""
        return ex.fire_come(await self._engine.store.due_of(ex.run.id), now)

    async def take(self, leases: Sequence[Lease], now: datetime) -> int:
        """Runs the sweeper claimed at ``now``: each is found here, or rebuilt from the store,
        and its due entries fired; how many runs were rebuilt and entries fired (0: all under
        way already). Every :data:`FIRE_SLICE` runs the loop gets a turn."""
        count_takeovers(self._engine.instruments, leases)
        done = 0
        for n, lease in enumerate(leases, 1):
            if n % FIRE_SLICE == 0:
                await asyncio.sleep(0)
            held = self._runs.get(lease.run_id)
            if held is not None and not held.released:
                if held.lease is None or held.lease.epoch == lease.epoch:
                    held.lease = lease
                    done += await self._fire_due(held, now)
                    continue
                # Taken by another engine meanwhile (a signal, a cancel) and given back: what
                # is held here is out of date. Rebuilt below.
                self._held.discard(held)
            try:
                await self.executor(lease.run_id, lease, now)
                done += 1
            except UnknownRunError:
                continue  # the run is gone: nothing to fire
            except (EngineError, NodeResolutionError, UnknownStoredFlow) as exc:
                # This engine cannot drive the run (its flow or nodes cannot be resolved here):
                # it waits for a worker that can.
                await self._presence.cannot_drive(lease.run_id, exc)
                continue
            except StoreError as exc:
                log.warning("cannot take run %s: %s", printable(lease.run_id), exc)
        return done

    async def take_unheld(self, run_id: str, wake: bool = False) -> RunExecutor | None:
        """Claim a run nobody holds alive and fire what is due, as the sweeper would; its
        executor if held here now (a run another worker holds is left to it). ``wake`` (a
        signal's or a cancel's): rebuilt first if nobody holds it, its lease taken by its first
        commit; a run its snapshot shows ended is not asked for."""
        now = self._engine.clock.now()
        try:
            with contextlib.suppress(EngineError, NodeResolutionError, UnknownStoredFlow):
                if wake and (ex := await self.executor(run_id, None, now)):
                    return ex
            lease = await self._engine.store.acquire_run(
                run_id, self._engine.owner, now, now + self._engine.lease_ttl
            )
            if lease is not None:
                await self.take([lease], now)
        except _Ended:
            return None  # (its snapshot says so: nothing to take, a signal to it is refused)
        except UnknownRunError:
            return None  # (a signal to it is refused)
        except StoreError as exc:
            log.warning("cannot take run %s: %s", printable(run_id), exc)
        ex = self._runs.get(run_id)
        return ex if ex is not None and not ex.released else None
