"""The asynchronous client: what an application does with runs (start, signal, cancel, read,
wait) and with flows in the store (register, list), from the store alone.

A client never runs node code: it works through an engine that executes nothing
(``Engine(executes=False)``) and reads the store; workers (``flowtide worker``) drive the runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from flowtide.client.registration import FlowSource, checked, register_flows, stored_catalog
from flowtide.client.results import RegisteredFlow, RunSummary
from flowtide.clock import Clock, SystemClock
from flowtide.engine.engine import Engine
from flowtide.engine.handles import SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import ParkedToken, RunResult
from flowtide.engine.run.children import open_parks
from flowtide.engine.timing.explain import Explanation
from flowtide.model.flow import Flow
from flowtide.store.base import EventRecord, RunRecord, Store, StoredFlowVersion
from flowtide.store.urls import a_store, store_for

__all__ = ["AsyncClient"]

Deadline = timedelta | datetime | str | int | None


class AsyncClient:
    """A client of the runs and flows in one store.

    ``store``: the store's URL (``sqlite:///runs.db``, ``postgresql://...``; opened on first
    use and closed by :meth:`close`) or a store (opened if it is not yet, and left open: its
    owner closes it). ``clock``: what :meth:`wait` times out on (the system's by default).
    ``poll``: how often, at the least, a wait looks at a store that other processes change.

    Use it as ``async with AsyncClient(url) as client: ...`` or call :meth:`close` at the end.
    """

    def __init__(
        self, store: str | Store, *, clock: Clock | None = None, poll: float = 1.0
    ) -> None:
        if isinstance(store, str):
            self._store, self._owns_store = store_for(store), True
        else:
            self._store, self._owns_store = a_store(store, "AsyncClient()"), False
        self._clock = clock if clock is not None else SystemClock()
        self._poll = poll
        self._opened: asyncio.Future[Engine] | None = None
        self._closed = False

    @property
    def store(self) -> Store:
        return self._store

    async def _ready(self) -> Engine:
        if self._closed:
            raise RuntimeError("this client is closed")
        if self._opened is None:
            # (One opening, whoever calls first: the others wait for it.)
            self._opened = asyncio.ensure_future(self._open())
        opening = self._opened
        try:
            return await asyncio.shield(opening)
        except Exception:
            if opening.done() and self._opened is opening:
                self._opened = None  # (the store could not be opened: the next call tries again)
            raise

    async def _open(self) -> Engine:
        await self._store.open()
        return Engine(store=self._store, clock=self._clock, poll=self._poll, executes=False)

    # -- runs ------------

    async def start(
        self,
        flow: str | Flow,
        input: Mapping[str, Any] | None = None,
        *,
        deadline: Deadline = None,
        run_id: str | None = None,
        entrypoint: str | None = None,
    ) -> str:
        """Store a new run of ``flow`` for a worker to run; its id. ``flow``: a flow id (the
        latest version registered in the store; :class:`~flowtide.UnknownFlowError` when none
        is), or a flow (its document is stored with the run). ``deadline``: the whole run's
        budget, a duration (``timedelta``, ISO 8601 text, milliseconds) or an instant."""
        engine = await self._ready()
        handle = await engine.start(
            flow, input, deadline=deadline, run_id=run_id, entrypoint=entrypoint
        )
        return handle.run_id

    async def signal(
        self,
        run_id: str | None = None,
        *,
        placement: str | None = None,
        key: str | None = None,
        token_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        output: str | None = None,
        idempotency_key: str | None = None,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> SignalReceipt:
        """Signal a parked token, by ``run_id`` and ``placement`` (or ``token_id``), or by its
        correlation ``key``; see :meth:`flowtide.Engine.signal`. ``wait``: seconds to wait for
        the answer of the worker that holds the run (None: as long as it takes); a signal not
        answered in time raises :class:`~flowtide.RequestPending`, and stays recorded, to be
        applied when a worker takes the run. A refusal raises :class:`~flowtide.SignalRefused`.
        ``sender``: who sends it (a name kept with the request and in the history).
        """
        engine = await self._ready()
        return await engine.signal(
            run_id,
            placement=placement,
            key=key,
            token_id=token_id,
            payload=payload,
            output=output,
            idempotency_key=idempotency_key,
            wait=wait,
            sender=sender,
        )

    async def cancel(
        self,
        run_id: str,
        reason: str | None = None,
        *,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> bool:
        """Cancel a run (it ends ``cancelled``, its running nodes are cancelled); False if it had
        ended already. ``wait`` and ``sender`` as for :meth:`signal`."""
        engine = await self._ready()
        return await engine.cancel(run_id, reason, wait=wait, sender=sender)

    async def get(self, run_id: str) -> RunResult:
        """Where the run stands now: its result once it has ended; else its lifecycle, state and
        the tokens that wait parked (those of its subflows' children included). Raises
        :class:`~flowtide.UnknownRunError`."""
        await self._ready()
        run = await self._store.get_run(run_id)
        if Lifecycle(run.lifecycle).terminal:
            return await self._ended(run)
        parks = await open_parks(self._store, run_id)
        return RunResult(
            run_id=run.id,
            lifecycle=Lifecycle(run.lifecycle),
            outcome=None,
            state=await self._store.get_state(run_id),
            parked=tuple(
                ParkedToken(p.token_id, p.placement, p.key, p.deadline, p.payload, p.parked_at)
                for p in parks
            ),
        )

    async def _ended(self, run: RunRecord) -> RunResult:
        if run.result:
            return RunResult.from_dict(run.result)
        state = await self._store.get_state(run.id)
        return RunResult(run.id, Lifecycle(run.lifecycle), run.outcome, state)

    async def wait(
        self,
        run_id: str,
        timeout: float | None = None,  # noqa: ASYNC109 (on the client's clock, as Client.wait)
    ) -> RunResult:
        """The run's result once it has ended, whichever worker drives it; ``timeout``: seconds
        to wait at most (then :class:`TimeoutError`; the run goes on)."""
        engine = await self._ready()
        ending = asyncio.ensure_future(engine.wait(run_id))
        if timeout is None:
            return await ending
        timer = asyncio.ensure_future(self._clock.sleep(timedelta(seconds=timeout)))
        try:
            await asyncio.wait((ending, timer), return_when=asyncio.FIRST_COMPLETED)
            if ending.done():
                return ending.result()
            raise TimeoutError(f"run {run_id!r} has not ended within {timeout:g} s")
        finally:
            ending.cancel()
            timer.cancel()

    async def runs(
        self, *, lifecycle: str | None = None, flow_id: str | None = None, limit: int | None = 50
    ) -> list[RunSummary]:
        """Stored runs, newest first: those in ``lifecycle`` (a :class:`~flowtide.Lifecycle`
        value) and of ``flow_id`` if given, at most ``limit`` (None: all)."""
        await self._ready()
        if lifecycle is not None and lifecycle not in {m.value for m in Lifecycle}:
            known = ", ".join(m.value for m in Lifecycle)
            raise ValueError(f"lifecycle {lifecycle!r} is not one of {known}")
        found = [
            run
            for run in await self._store.list_runs(lifecycle)
            if flow_id is None or run.flow_id == flow_id
        ]
        found.sort(key=lambda run: (run.created_at, run.id), reverse=True)
        return [RunSummary.of(run) for run in found[:limit]]

    async def history(self, run_id: str) -> list[EventRecord]:
        """The run's events, in order (raises :class:`~flowtide.UnknownRunError`)."""
        await self._ready()
        return list(await self._store.history(run_id))

    async def explain(
        self, run_id: str, placement: str | None = None, *, token_id: str | None = None
    ) -> Explanation:
        """How a token's deadline was computed (see :meth:`flowtide.Engine.explain`)."""
        engine = await self._ready()
        return await engine.explain(run_id, placement=placement, token_id=token_id)

    async def explain_run(self, run_id: str) -> list[Explanation]:
        """How each deadline of the run was computed: the last visit of every placement that
        had a window or timers (see :meth:`flowtide.Engine.explain_run`)."""
        engine = await self._ready()
        return list(await engine.explain_run(run_id))

    # -- flows ------------

    async def flows(self, flow_id: str | None = None) -> list[StoredFlowVersion]:
        """Every flow version in the store (or those of ``flow_id``), by id, oldest first: the
        last of an id is its latest, the one a run started by that id uses."""
        await self._ready()
        return list(await self._store.flow_versions(flow_id))

    async def register(self, *flows: FlowSource) -> list[RegisteredFlow]:
        """Check each flow as ``flowtide validate`` does without code (a subflow may name a flow
        of the store or of this call) and store them all, or none if any is bad
        (:class:`~flowtide.FlowValidationError` names every problem). Runs started by a flow's
        id then use the document registered last. ``flows``: flows, or documents (a path, the
        text, or the parsed data)."""
        await self._ready()
        good = checked(flows, await stored_catalog(self._store))
        return await register_flows(self._store, good, self._clock.now())

    # -- the end ------------

    async def close(self) -> None:
        """Close the client (and the store it opened from a URL); closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._opened is not None:
            with contextlib.suppress(Exception):  # (it did not open: nothing to close)
                await (await self._opened).close()
        if self._owns_store:
            await self._store.close()

    async def __aenter__(self) -> AsyncClient:
        await self._ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
