"""The one place the engine writes a step to its store.

A step's commit is shielded from cancellation: once sent, it is waited for to its end, and a
cancelled caller sees its cancellation once the store has answered.

A :class:`~flowtide.store.StoreConflict` means another actor won the step and is raised at
once. Any other :class:`~flowtide.store.StoreError` means the store is unavailable for now: the
commit is tried again after a backoff on the engine's clock, and if the store keeps failing,
:class:`~flowtide.engine.errors.StoreUnavailableError` is raised: the caller lets go of the run,
which stays in the store as it was for recovery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta

from flowtide.clock import Clock
from flowtide.engine.errors import StoreUnavailableError
from flowtide.store.base import Commit, EventRecord, Store, StoreConflict, StoreError

COMMIT_ATTEMPTS = 5
"""How many times a step's commit is tried before the store is held to be unavailable."""
FIRST_BACKOFF = timedelta(milliseconds=100)
"""The wait before the second try; each later wait doubles it (0.1 s, 0.2 s, 0.4 s, 0.8 s)."""

log = logging.getLogger("flowtide.engine")


async def commit_step(store: Store, commit: Commit, clock: Clock) -> Sequence[EventRecord]:
    """Apply ``commit`` to ``store``; returns its events with their ``seq`` filled in."""
    delay = FIRST_BACKOFF
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return await _shielded(store, commit)
        except StoreConflict:
            raise
        except StoreError as exc:
            if attempt == COMMIT_ATTEMPTS:
                raise StoreUnavailableError(commit.run_id, attempt, exc) from exc
            log.warning(
                "run %s: commit failed (%s: %s); try %d of %d in %.1f s",
                commit.run_id,
                type(exc).__name__,
                exc,
                attempt + 1,
                COMMIT_ATTEMPTS,
                delay.total_seconds(),
            )
            await clock.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # the loop returns or raises


async def _shielded(store: Store, commit: Commit) -> Sequence[EventRecord]:
    """``store.commit(commit)``, waited for to its end even if the caller is cancelled meanwhile
    (the caller's cancellation is raised once the store has answered): a step's decision is in
    memory before its commit is sent, and a store applies a commit whole or not at all."""
    sending = asyncio.ensure_future(store.commit(commit))
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
