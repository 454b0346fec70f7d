"""The one place the engine writes a step to its store.

A step decides and changes the run's view in memory before its commit is sent, so a commit must
never be given up half-way by a cancelled caller that then goes on with that view. A step run in
a caller's task (a signal, say) is shielded: once sent, its commit is waited for to its end, and
the caller sees its cancellation once the store has answered. The executor's own tasks need no
shield: nothing cancels them but the executor's close, which drops its view of the run (the store
applies a commit whole or not at all, so either way the run is as the store has it).

A :class:`~flowtide.store.StoreConflict` means another actor won the step and is raised at
once; a :class:`~flowtide.store.StoreDataError` (the store refused a value) too: the data is
at fault, and the step fails as for any error. Any other :class:`~flowtide.store.StoreError`
means the store is unavailable for now: the commit is tried again after a backoff on the
engine's clock (unless it was lost while being stored, and may have been applied:
:class:`~flowtide.store.CommitOutcomeUnknown`, raised at once as below), and if the store keeps
failing,
:class:`~flowtide.engine.errors.StoreUnavailableError` is raised: the caller lets go of the run,
which stays in the store as it was for recovery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Sequence
from datetime import timedelta
from typing import Any

from flowtide.clock import Clock
from flowtide.engine.errors import StoreUnavailableError
from flowtide.engine.worker.instruments import (
    NO_INSTRUMENTS,
    EngineInstruments,
    seconds,
    timed,
)
from flowtide.printable import printable
from flowtide.store.base import (
    Commit,
    CommitOutcomeUnknown,
    EventRecord,
    Store,
    StoreConflict,
    StoreDataError,
    StoreError,
)

COMMIT_ATTEMPTS = 5
"""How many times a step's commit is tried before the store is held to be unavailable."""
FIRST_BACKOFF = timedelta(milliseconds=100)
"""The wait before the second try; each later wait doubles it (0.1 s, 0.2 s, 0.4 s, 0.8 s)."""

log = logging.getLogger("flowtide.engine")


def commit_step(
    store: Store,
    commit: Commit,
    clock: Clock,
    *,
    shield: bool = True,
    instruments: EngineInstruments = NO_INSTRUMENTS,
) -> Coroutine[Any, Any, Sequence[EventRecord]]:
    """Apply ``commit`` to ``store``; returns its events with their ``seq`` filled in.
    ``shield``: see the module's docstring (False only in a task the executor owns);
    ``instruments``: told how long the store took to answer, whatever it answered. (The
    coroutine that sends it itself, unless timed: no frame more between a step and its store.)"""
    if not timed(instruments):
        return _tried(store, commit, clock, shield)
    return _timed(store, commit, clock, shield, instruments)


async def _timed(
    store: Store, commit: Commit, clock: Clock, shield: bool, instruments: EngineInstruments
) -> Sequence[EventRecord]:
    """``commit`` sent (:func:`_tried`), its store's answer timed whatever it was."""
    sent = clock.now()
    try:
        return await _tried(store, commit, clock, shield)
    finally:
        instruments.commit(seconds(sent, clock.now()))


async def _tried(store: Store, commit: Commit, clock: Clock, shield: bool) -> Sequence[EventRecord]:
    """``commit`` sent, and sent again after a backoff while the store is unavailable."""
    delay = FIRST_BACKOFF
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            sending = store.commit(commit)
            return await (_shielded(sending) if shield else sending)
        except (StoreConflict, StoreDataError):
            raise  # (another actor won; or the data is at fault, and would be again)
        except CommitOutcomeUnknown as exc:
            # Perhaps applied: sent again it could be applied twice. The run is let go and read
            # again from the store, which says whether it was.
            log.warning(
                "run %s: the store was lost while a commit was stored (%s); it may have been "
                "applied: the run is read again from the store",
                printable(commit.run_id),
                exc,
            )
            raise StoreUnavailableError(commit.run_id, attempt, exc) from exc
        except StoreError as exc:
            if attempt == COMMIT_ATTEMPTS:
                raise StoreUnavailableError(commit.run_id, attempt, exc) from exc
            log.warning(
                "run %s: commit failed (%s: %s); try %d of %d in %.1f s",
                printable(commit.run_id),
                type(exc).__name__,
                exc,
                attempt + 1,
                COMMIT_ATTEMPTS,
                delay.total_seconds(),
            )
            await clock.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # the loop returns or raises


async def _shielded(commit: Awaitable[Sequence[EventRecord]]) -> Sequence[EventRecord]:
    """A store's ``commit``, waited for to its end even if the caller is cancelled meanwhile
    (the caller's cancellation is raised once the store has answered): a step's decision is in
    memory before its commit is sent, and a store applies a commit whole or not at all."""
    sending = asyncio.ensure_future(commit)
    cancelled = False
    while not sending.done():
        try:
            await asyncio.shield(sending)
        except asyncio.CancelledError:
            if sending.cancelled():
                raise
            cancelled = True
    events = sending.result()
    if cancelled:
        raise asyncio.CancelledError
    return events
