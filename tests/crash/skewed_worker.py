"""A worker process whose clock is wrong: ``python -m tests.crash.skewed_worker URL SECONDS
LEASE`` runs an engine on the system clock shifted by SECONDS (ahead if positive), with the
crash nodes and a lease of LEASE seconds, until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from datetime import datetime, timedelta

from flowtide.clock import SystemClock
from flowtide.engine import Engine
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
    asyncio.run(work(url, timedelta(seconds=seconds), timedelta(seconds=lease)))
