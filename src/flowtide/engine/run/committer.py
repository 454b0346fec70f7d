"""The one way from a run's executor to the store.

Each step of a run is one commit (:func:`~flowtide.engine.run._commit.commit_step`). Some of what a
step decides is written by the next commit that writes the same token: the compare-and-set
condition of a token claimed in memory (``Commit.expect``), the due entries fired for it
(``Commit.due_fired``), the deadline its claim fires (``Commit.fires_deadline``), and the parks
closed in memory (a cancelled token's). The committer keeps those until then, folds them into
that commit, sends it, and hands what it recorded to who listens.

A step whose commit may wait (steps are queued after it: see
:mod:`~flowtide.engine.run.coalescing`) leaves it here instead (:meth:`Committer.hold_back`);
the next commit sent takes it along, in one transaction, or is sent after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run._commit import commit_step
from flowtide.engine.run.coalescing import CommitGroup, as_decided
from flowtide.engine.worker._host import RunHost
from flowtide.store.base import ENDED_LIFECYCLES, Commit, DueEntry, EventRecord, Expect, ParkRecord

PARKED = Lifecycle.PARKED.value


class Committer:
    """One run's commits, and what they carry for the tokens they write."""

    __slots__ = (
        "closing_parks",
        "expect",
        "fired",
        "fires",
        "held",
        "held_stored",
        "host",
        "seq",
        "stored_events",
    )

    def __init__(self, host: RunHost) -> None:
        self.host = host
        self.expect: dict[str, Expect] = {}
        """Compare-and-set conditions for the next commit that writes these tokens."""
        self.fires: dict[str, datetime] = {}
        """Token id -> the deadline its claim fires (a park's timeout, an interrupting timer):
        the next commit that writes the token carries it (``Commit.fires_deadline``)."""
        self.fired: dict[str, list[DueEntry]] = {}
        """Due entries fired for a token and not removed yet: the next commit that writes the
        token removes them (``Commit.due_fired``), with the move they caused."""
        self.closing_parks: list[ParkRecord] = []
        """Parks closed in memory (a cancelled token), written with the next commit."""
        self.seq = 0
        """The seq of the last history event committed (or restored), unless
        ``stored_events`` is set (see :meth:`last_seq`)."""
        self.stored_events: Sequence[EventRecord] | None = None
        """The events of the last commit, until their last seq is read (most runs never ask)."""
        self.held: CommitGroup | None = None
        """The commits of steps held back (:meth:`hold_back`), not sent yet."""
        self.held_stored: asyncio.Future[None] | None = None
        """Done once ``held`` is stored (or failed: with the error)."""

    def last_seq(self) -> int:
        """The seq of the last history event committed (or restored)."""
        stored = self.stored_events
        if stored is not None:
            if stored:
                self.seq = stored[-1].seq
            self.stored_events = None
        return self.seq

    def restored(self, seq: int) -> None:
        """The run was rebuilt from the store, whose history ends at ``seq``."""
        self.seq = seq
        self.stored_events = None

    def fold(self, c: Commit) -> None:
        """Put on ``c`` what is kept for the tokens it writes, and the parks closed since."""
        if self.closing_parks:
            c.parks = [*c.parks, *self.closing_parks]
            self.closing_parks = []
        if self.expect:
            for t in c.tokens:
                expected = self.expect.pop(t.id, None)
                if expected is not None:
                    c.expect = {**c.expect, t.id: expected}
        if self.fires:
            for t in c.tokens:
                deadline = self.fires.pop(t.id, None)
                if deadline is not None:
                    latest = c.fires_deadline or deadline
                    c.fires_deadline = max(latest, deadline)
        if self.fired:
            fired = [e for t in c.tokens for e in self.fired.pop(t.id, ())]
            if fired:
                c.due_fired = [*c.due_fired, *fired]

    def may_hold_back(self, c: Commit) -> bool:
        """Whether ``c`` (folded; its step :func:`~flowtide.engine.run.coalescing.may_wait`)
        may be stored with the commits held back so far."""
        return self.held is None or self.held.accepts(c)

    def hold_back(self, c: Commit) -> asyncio.Future[None]:
        """Keep ``c`` (see :meth:`may_hold_back`) for the next commit sent, or :meth:`flush`;
        returns what is done once it is stored."""
        as_decided(c)
        if self.held is None or self.held_stored is None:
            self.held = CommitGroup(c)
            self.held_stored = asyncio.get_running_loop().create_future()
            self.held_stored.add_done_callback(_retrieved)
        else:
            self.held.add(c)
        return self.held_stored

    def unsent(self) -> asyncio.Future[None] | None:
        """What is done once the commits held back now are stored (None: none is)."""
        return self.held_stored

    async def flush(self) -> None:
        """Store the commits held back, if any, in one transaction."""
        if self.held is not None:
            await self.send(None, shield=True)

    async def send(self, c: Commit | None, *, shield: bool) -> None:
        """Commit ``c`` (folded), with the commits held back before it: in the same
        transaction where they may be (see :mod:`~flowtide.engine.run.coalescing`), else just
        before it; ``None``: only those. ``shield``: see
        :func:`~flowtide.engine.run._commit.commit_step` (the ones held back always are).
        Once stored, its events are handed to who listens, and the sweeper is told of the run's
        next due instant (:meth:`stored`)."""
        held, stored = self.held, self.held_stored
        if held is not None and stored is not None:
            self.held = self.held_stored = None
            if c is not None and held.accepts(c):
                held.add(c)
                c = None  # (stored with them)
            await self._send_held(held.commit(), stored)
        if c is not None:
            host = self.host
            events = await commit_step(
                host.store, c, host.clock, shield=shield, instruments=host.instruments
            )
            self.stored(c, events)

    async def _send_held(self, c: Commit, stored: asyncio.Future[None]) -> None:
        """Commit ``c``, the commits held back (and perhaps the one sent with them), shielded;
        ``stored`` says how it ended to the steps that held theirs back."""
        host = self.host
        try:
            events = await commit_step(
                host.store, c, host.clock, shield=True, instruments=host.instruments
            )
            self.stored(c, events)
        except BaseException as exc:
            # Not stored: nor is anything of the steps held back, whose decisions rested on
            # one another; each of them is told (a conflict drops the run's view).
            if isinstance(exc, asyncio.CancelledError):
                stored.cancel()
            else:
                stored.set_exception(exc)
            raise
        stored.set_result(None)

    def stored(self, c: Commit, events: Sequence[EventRecord]) -> None:
        """``c`` is stored (by this committer, or as the run's first commit, with which the run
        was created: see :mod:`flowtide.engine.run.creation`): its ``events``, with their
        seq, handed to who listens; the sweeper told of the run's next due instant."""
        host = self.host
        if events:
            self.stored_events = events
        if c.due_fired or c.fires_deadline is not None:
            # Fired by the sweeper: until this commit the run's wake instant, passed, was the
            # earliest, and hid the next one from the sweeper (it looked again only later).
            host.wake_sweeper()
        elif c.run is not None and c.run.lifecycle in ENDED_LIFECYCLES:
            pass  # (an ended run has no wake instant: nothing can be due sooner)
        elif c.release and not _given_back_parked(c):
            host.wake_sweeper()  # (its wake instant is no longer the lease's)
        elif c.due:
            host.wake_sweeper(min(e.when for e in c.due))
        host.publish(events)


def _given_back_parked(c: Commit) -> bool:
    """Whether ``c`` gives its run back parked: its wake instant is then its next due entry,
    never earlier than while it was held (the earlier of that entry and the lease's expiry), so
    the sweeper need not look again, but for the due entries ``c`` sets."""
    return c.run is not None and c.run.lifecycle == PARKED


def _retrieved(stored: asyncio.Future[None]) -> None:
    """(A failure of commits held back is raised to the steps that wait for it, and to the step
    that sent them: the future's own copy need not be.)"""
    if not stored.cancelled():
        stored.exception()
