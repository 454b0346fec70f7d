"""Waiting for other processes' changes: one connection that LISTENs on the store's channel.

Commits that make a run claimable sooner (a new run, a run given back, a due entry of a run
nobody holds) or that answer a signal notify the channel, in their transaction: PostgreSQL
delivers the notice when (and only if) it commits. The listening connection is opened on the
first wait, outside the pool (it must not be handed to anyone else), in autocommit mode, and
opened again after it failed: within a wait, as soon as the database answers again, and that
wait then ends as if by a notice (some may have been sent while it was down). Notices that
arrive between two waits are kept by the connection and end the next wait at once. One waiter
reads the connection at a time; a notice it reads ends the wait of every waiter of this store
(the engines of one process sharing it: a sweeper, a signal waiting for its answer,
``engine.wait``). A notice lost (before the first wait) only delays: callers look again at
least every ``seconds``.

A notice whose payload begins with :data:`TOLD` tells only of what waiters for an answer or a
run's end look for (``settle_run``): it does not end the wait of a sweeper, which looks for
runs that need a worker sooner (``wakes_only``). Any other notice (``wake:`` and a run id, so
that no run's id can pass for the prefix) may tell of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Literal

import psycopg

from flowtide.store.postgres.queries import with_channel

__all__ = ["RECONNECT_EVERY", "TOLD", "ChangeListener"]

Listening = psycopg.AsyncConnection[tuple[object, ...]]
RECONNECT_EVERY = 0.5
"""Seconds between attempts to listen again while the database does not answer."""
TOLD = "told:"
"""How the payload of a notice begins that no run needs a worker sooner for."""
Heard = Literal["nothing", "told", "wake"]
"""What one read of the connection heard: no notice, one for waiters only (:data:`TOLD`), or
one that may move a wake instant (any other; or notices may have been missed)."""


class ChangeListener:
    """Waits for notices on ``channel`` of the database ``conninfo`` names (see the module)."""

    def __init__(self, conninfo: str, channel: str) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._connection: Listening | None = None
        self._lock = asyncio.Lock()
        """One waiter reads the connection at a time."""
        self._notices = 0
        """How many waits have ended with a notice (every waiter's wait ends with one)."""
        self._wakes = 0
        """How many of those may have moved a wake instant (see :data:`Heard`)."""
        self._bell = asyncio.Event()
        """Set when the reading waiter stops reading (then replaced)."""
        self._lost = False
        """The connection could not be made for a while: notices may have been missed."""

    async def wait(self, seconds: float, *, wakes_only: bool = False) -> bool:
        """True once a notice arrives (or may have been missed: the connection failed), False
        once ``seconds`` have passed without one. ``wakes_only``: a notice for waiters only
        (:data:`TOLD`) does not end the wait."""
        deadline = time.monotonic() + max(seconds, 0.0)
        seen = self._heard(wakes_only)
        while self._heard(wakes_only) == seen:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._lock.locked():
                # Another waiter reads the connection: its notice ends this wait too, and its
                # bell rings when it stops reading (this waiter may read on, then).
                bell = self._bell
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await bell.wait()
                continue
            async with self._lock:
                try:
                    heard = await self._wait_locked(deadline)
                    if heard != "nothing":
                        self._notices += 1
                    if heard == "wake":
                        self._wakes += 1
                finally:
                    self._bell.set()
                    self._bell = asyncio.Event()
        return True

    def _heard(self, wakes_only: bool) -> int:
        return self._wakes if wakes_only else self._notices

    async def _wait_locked(self, deadline: float) -> Heard:
        connection = self._connection
        if connection is None or connection.closed:
            connection = await self._reconnect(deadline)
            if connection is None:
                return "nothing"
            if self._lost:
                self._lost = False
                return "wake"  # (notices may have been sent while it was down)
        heard: Heard = "nothing"
        notices = connection.notifies(timeout=max(deadline - time.monotonic(), 0.0), stop_after=1)
        try:
            async with contextlib.aclosing(notices):
                async for notice in notices:
                    heard = "told" if notice.payload.startswith(TOLD) else "wake"
        except psycopg.Error:
            await self.close()
            return "wake"  # (notices may have been lost while it failed)
        return heard

    async def _reconnect(
        self, deadline: float
    ) -> psycopg.AsyncConnection[tuple[object, ...]] | None:
        """The listening connection, connected again as soon as the database answers (tried
        every :data:`RECONNECT_EVERY` seconds until ``deadline``), so that the first notice after
        an outage is not missed until the next wait; None if it did not answer in time."""
        while True:
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    return await self._connected()
            except (TimeoutError, psycopg.Error):
                self._lost = True
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                await asyncio.sleep(min(RECONNECT_EVERY, left))

    async def _connected(self) -> Listening:
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        try:
            await connection.execute(with_channel("listen", self._channel))
        except BaseException:
            await connection.close()
            raise
        self._connection = connection
        return connection

    async def close(self) -> None:
        """Stop listening (a later wait listens again)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                await connection.close()
