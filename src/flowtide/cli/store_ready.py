"""A worker's store, opened once its database is up.

A worker is often started by a supervisor before or while its database comes up. A database
that cannot be reached for now (:class:`~flowtide.store.base.StoreNotReady`: its server down,
still starting, or out of connections) is waited for: said once, then tried again on the clock
with pauses that grow, until it opens or the worker is stopped. A store that can never open as
named (a wrong address, refused credentials, an unknown database or kind of store) fails at
once.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from flowtide.clock import Clock
from flowtide.store.base import Store, StoreNotReady

__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "open_when_ready", "pause_after"]

FIRST_PAUSE = timedelta(seconds=0.5)
"""How long a worker waits before trying its store again the first time."""

LONGEST_PAUSE = timedelta(seconds=30)
"""The most a worker waits between two tries: a database that comes up is used within this."""

log = logging.getLogger("flowtide.worker")


def pause_after(failures: int) -> timedelta:
    """How long to wait after ``failures`` failed tries in a row (1, 2, ...): twice as long each
    time, from :data:`FIRST_PAUSE` up to :data:`LONGEST_PAUSE`."""
    doublings = min(max(failures - 1, 0), 16)  # (2**16 pauses of 0.5 s exceed any limit)
    return min(FIRST_PAUSE * (1 << doublings), LONGEST_PAUSE)


async def open_when_ready(store: Store, shown: str, clock: Clock) -> Store:
    """``store`` opened, once its database can be reached (``shown``: the store's URL as it
    may be shown, without its password). The first :class:`StoreNotReady` is logged once; it
    is tried again after each pause on ``clock``. Any other
    :class:`~flowtide.store.base.StoreOpenError` is raised at once. Cancelled, the store is
    closed."""
    failures = 0
    try:
        while True:
            try:
                await store.open()
            except StoreNotReady as exc:
                failures += 1
                if failures == 1:
                    log.warning(
                        "store %s is not ready (%s): trying again until it opens (Ctrl-C to stop)",
                        shown,
                        exc,
                    )
                await clock.sleep(pause_after(failures))
                continue
            if failures:
                log.info("store %s open after %d tries", shown, failures + 1)
            return store
    except BaseException:
        await store.close()
        raise
