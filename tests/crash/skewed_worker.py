"""A worker process whose clock is wrong: ``python -m tests.crash.skewed_worker URL SECONDS
LEASE [unmeasured]`` runs an engine on the system clock shifted by SECONDS (ahead if positive),
with the crash nodes and a lease of LEASE seconds, until SIGTERM.

The engine keeps time by the database's clock, measuring how far its own is off; with
``unmeasured`` it never learns that (every reading says "no difference"), as a worker whose
clock was set wrong since it last measured: what the database's clock still decides on its
own is all that keeps it from harm."""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import datetime, timedelta

from flowtide.clock import SystemClock
from flowtide.engine import Engine
from flowtide.store import Store
from flowtide.store.postgres import PostgresStore
from flowtide.store.urls import open_store
from tests.crash import nodes

NODES = nodes  # (imported for the process-wide registry)


class SkewedClock(SystemClock):
    """The system clock, shifted by ``skew``."""

    def __init__(self, skew: timedelta) -> None:
        super().__init__()
        self._skew = skew

    def now(self) -> datetime:
        return super().now() + self._skew


def unmeasured() -> None:
    """Every PostgreSQL store of this process reads its clock as this machine's."""
    PostgresStore.clock_offset = Store.clock_offset  # type: ignore[method-assign]


async def work(url: str, skew: timedelta, lease: timedelta) -> None:
    store = await open_store(url)
    engine = Engine(store=store, clock=SkewedClock(skew), poll=0.05, lease_ttl=lease)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        engine.sweeper.wake()
        await stop.wait()
    finally:
        await engine.close()
        await store.close()


if __name__ == "__main__":
    url, seconds, lease = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    if sys.argv[4:] == ["unmeasured"]:
        unmeasured()
    asyncio.run(work(url, timedelta(seconds=seconds), timedelta(seconds=lease)))
