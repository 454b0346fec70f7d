"""Child runs: the runs a subflow placement or a scatter's flow body starts.

A child is a run of its own in the store (``parent_run_id``, ``parent_token_id``), with its own
lease: a signal to it, a takeover of it or its end may happen in any engine. A parent held in
memory waits for its end as any caller of :meth:`~flowtide.engine.Engine.wait` does, whichever
engine drives it; a parent whose child waits parked is let go like any parked run, and the
commit that ends a subflow's child sets a due entry on the parent (:func:`parent_wake`), so
that whichever worker claims it rebuilds the parent, whose token finds the child ended. That
entry goes only with the commit that moves the token on (or ends the parent): a parent let go
or lost before that step (its store down, a commit's answer lost, its worker gone) is woken
by it again (:func:`awaits_child`).

Its id is derived from where it was started (the parent run, the token, the placement, its
visit and attempt there, the scatter item): a parent rebuilt after a crash, or taken over by
another worker, finds the child it had started and waits for it again, instead of starting the
same work twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowtide.clock import Clock
from flowtide.engine.errors import EngineError, StoreUnavailableError
from flowtide.engine.flows.catalog import FlowCatalog
from flowtide.engine.flows.plan import FlowPlan
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import RunResult
from flowtide.engine.run.due import DueKind, DuePurpose
from flowtide.engine.timing.scope import Cancellation, CancelScope
from flowtide.store.base import (
    DueEntry,
    ParkRecord,
    RunRecord,
    Store,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)

__all__ = [
    "ChildRuns",
    "StartedChild",
    "awaits_child",
    "child_run_id",
    "open_parks",
    "parent_wake",
]

_NAMESPACE = uuid.UUID("6f1c2d0e-5b7a-4c8e-9a43-0d2f6b1e7c55")

Create = Callable[[FlowPlan, RunRecord, dict[str, Any], CancelScope], Awaitable[object]]
"""Creates ``run`` in the store, held by this engine, and starts driving it in ``scope``."""


def child_run_id(
    parent_run_id: str,
    token_id: str,
    placement: str,
    visit: int,
    attempt: int,
    item: int | None = None,
) -> str:
    """The id of the child run that token ``token_id`` of run ``parent_run_id`` starts at
    ``placement``, at this ``visit`` and ``attempt`` there (for scatter ``item``, by index):
    the same every time that start is made again, and another for each placement (visits are
    counted per placement: a token goes from one subflow to the next at visit 1 of each)."""
    at = f"{token_id}/{placement}/{visit}/{attempt}" + (f"/{item}" if item is not None else "")
    return uuid.uuid5(_NAMESPACE, f"{parent_run_id}/{at}").hex


async def open_parks(store: Store, run_id: str) -> list[ParkRecord]:
    """The open parks of run ``run_id`` and of the subflow children its running tokens wait
    for, and theirs (each park names its own run)."""
    found = list(await store.parks(run_id=run_id, open_only=True))
    for token in await store.tokens(run_id, [TokenStatus.RUNNING]):
        child = child_run_id(run_id, token.id, token.placement, token.visit, token.attempt)
        try:
            found += await open_parks(store, child)
        except UnknownRunError:
            continue  # (not a subflow's token, or its child is not stored yet)
    return found


def parent_wake(run: RunRecord, now: datetime) -> list[DueEntry]:
    """The due entry that the end of ``run`` sets on its parent, due ``now``: for a subflow's
    child (none for a run that is no child, or a scatter item's)."""
    if run.parent_run_id is None or run.parent_token_id is None:
        return []
    return [DuePurpose.child_ended(run.id).entry(now, run.parent_run_id, run.parent_token_id)]


def awaits_child(run_id: str, token: TokenRecord, purpose: DuePurpose | None) -> bool:
    """Whether ``token`` of run ``run_id`` still waits at its subflow for the child whose end a
    due entry of ``purpose`` tells: its own task moves it on by that end, and the move's commit
    removes the entry. Until then the entry stays, so that the parent is woken again if it is
    let go first. (An entry of a child the token no longer waits for, or of any other purpose,
    is not.)"""
    if purpose is None or purpose.kind is not DueKind.CHILD_ENDED or not purpose.child:
        return False
    if token.status is not TokenStatus.RUNNING:
        return False
    waited = child_run_id(run_id, token.id, token.placement, token.visit, token.attempt)
    return purpose.child == waited


@dataclass(frozen=True, slots=True)
class StartedChild:
    """A child run, and whether this call created it (False: it had been started before)."""

    run: RunRecord
    created: bool
    ended: Callable[[], Awaitable[RunResult]]
    """Its result once it has ended, wherever it is driven."""
    settled: Callable[[], Awaitable[RunResult]]
    """Its next quiescent point parked on the outside world (or its end)."""


class ChildRuns:
    """Starts child runs, or finds them again, for the engine's executors."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        catalog: FlowCatalog,
        create: Create,
        wait: Callable[[str], Awaitable[RunResult]],
        wait_parked: Callable[[str], Awaitable[RunResult]],
        cancel: Callable[[str, str | None], bool],
        deadline: Callable[[timedelta | None, datetime], datetime | None],
    ) -> None:
        self._store = store
        self._clock = clock
        self._catalog = catalog
        self._create = create
        self._wait = wait
        self._wait_parked = wait_parked
        self._cancel = cancel
        self._deadline = deadline

    async def start(
        self,
        parent: RunRecord,
        flow_id: str,
        state: dict[str, Any],
        scope: CancelScope,
        token: TokenRecord | None,
        item: Any,
        run_id: str,
    ) -> StartedChild:
        """Child ``run_id`` of ``parent``: created and started in ``scope``, or, if it exists
        already, the one that was started. A cancel of ``scope`` then cancels it."""
        found = await self._existing(parent, run_id)
        if found is not None:
            # Driven elsewhere, or here without this scope: a cancel of the scope reaches it
            # through the store.
            scope.on_cancel(lambda c: self._cancel_child(run_id, c))
            return StartedChild(found, False, *self._waits(run_id))
        plan, digest = await self._catalog.plan_of_child(parent, flow_id)
        now = self._clock.now()
        options: dict[str, Any] = {"flow_digest": digest, "flows": parent.options.get("flows", {})}
        if item is not None:
            options["item"] = item
        run = RunRecord(
            id=run_id,
            flow_id=flow_id,
            flow_version=plan.flow.version,
            lifecycle=Lifecycle.PENDING.value,
            created_at=now,
            deadline=self._deadline(plan.flow.deadline, now),
            parent_run_id=parent.id,
            parent_token_id=token.id if token is not None else None,
            depth=parent.depth + 1,
            options=options,
        )
        await self._create(plan, run, state, scope)
        # Once let go (parked), the child is under ``scope`` no more: a cancel reaches it through
        # the store then (after the scope's own, which reaches it while it is held here).
        loop = asyncio.get_running_loop()

        def through_store(c: Cancellation) -> None:
            loop.call_soon(self._cancel_child, run_id, c)

        scope.on_cancel(through_store)
        return StartedChild(run, True, *self._waits(run_id))

    def _waits(
        self, run_id: str
    ) -> tuple[Callable[[], Awaitable[RunResult]], Callable[[], Awaitable[RunResult]]]:
        return (lambda: self._ended(run_id)), (lambda: self._wait_parked(run_id))

    async def _ended(self, run_id: str) -> RunResult:
        """Child ``run_id``'s end, wherever it is driven. Its holder here may lose its view of
        it (a commit's answer lost, the store failing its step): that tells who waits for it,
        but the child is in the store, which the wait reads from then on; the parent is let go
        only if the store does not answer it."""
        while True:
            try:
                return await self._wait(run_id)
            except StoreUnavailableError as exc:
                if exc.run_id != run_id:
                    raise

    async def _existing(self, parent: RunRecord, run_id: str) -> RunRecord | None:
        try:
            run = await self._store.get_run(run_id)
        except UnknownRunError:
            return None
        if run.parent_run_id != parent.id:
            raise EngineError(f"run {run_id!r} exists but is not a child of run {parent.id!r}")
        return run

    def _cancel_child(self, run_id: str, cancellation: Cancellation) -> None:
        reason = cancellation.message or f"its parent's {cancellation.reason.value}"
        self._cancel(run_id, reason)
