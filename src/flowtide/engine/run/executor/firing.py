"""Due entries fired: a wait's or a backoff's end, a park's deadline, an escalation timer, a
request recorded for the run, the run's deadline; each fired once, in a step of its own. (A
child's end moves the subflow token that waits for it in that token's own task, whose move
removes the entry.) A part the executor holds (:class:`DueFiring`), calling back only through
:class:`FiringHost`.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any, Protocol

from flowtide.engine.errors import UnroutedOutputError
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.attempts import Running
from flowtide.engine.run.children import awaits_child
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import DEADLINE, RESUME, SIGNAL, TIMEOUT, DuePurpose, parse_purpose
from flowtide.engine.run.executor.ports import EndPort, MovePort, StepPort
from flowtide.engine.run.executor.records import escalation
from flowtide.engine.run.executor.signals import Signals
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.marks import FiredTimer, interrupt, mark_due, mark_side, timer_fired
from flowtide.engine.run.move import Move
from flowtide.engine.run.parking import due_applies
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.placements import AnyPlacement
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    ParkStatus,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
log = logging.getLogger("flowtide.engine")


class FiringHost(StepPort, MovePort, EndPort, Protocol):
    """What firing due entries needs of the executor besides a step and a move: the step lock,
    the committer (what the next commits expect and fire), the running and starting attempts,
    its signals and task steps, new tokens and their tasks, and ending the run."""

    @property
    def closed(self) -> bool: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def committer(self) -> Committer: ...

    @property
    def running(self) -> Running: ...

    @property
    def starting(self) -> set[str]: ...

    @property
    def signals(self) -> Signals: ...

    @property
    def task_steps(self) -> TaskSteps: ...

    def new_token(
        self, placement: str, lineage: tuple[tuple[str, int, int], ...]
    ) -> TokenRecord: ...

    def spawn(self, token: TokenRecord) -> None: ...

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None: ...

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None: ...


class DueFiring:
    """Fires the run's due entries, through ``ex``."""

    def __init__(self, ex: FiringHost) -> None:
        self.ex = ex
        self.firing: set[DueEntry] = set()
        """Due entries being fired (not fired twice if the run is claimed again meanwhile)."""

    def fire_all(self, entries: Sequence[DueEntry]) -> int:
        """The sweeper says these due entries have come: requests first (the store lets no
        deadline fire before those recorded before it, and one recorded after it is refused as
        late whichever comes first). How many were not being fired already."""
        purposes = [(e, parse_purpose(e.purpose)) for e in entries]
        purposes.sort(key=lambda ep: ep[1] != SIGNAL)
        return sum(self.fire_due(e, purpose) for e, purpose in purposes)

    def fire_due(self, entry: DueEntry, purpose: DuePurpose | None) -> bool:
        """This due entry has come (see :class:`~flowtide.store.DueEntry`), ``purpose`` read
        from it: a step of its own, under the step lock. False if it is being fired already (or
        the run is ending, which removes it; or it tells of the end of a child that a token
        still waits for, whose own task moves it on, and whose move removes the entry: no
        step is taken for it, which would hold up the move and the run's end with it)."""
        if self.ex.view.end is not None or self.ex.closed or entry in self.firing:
            return False
        if self._awaited(entry, purpose):
            return False
        self.firing.add(entry)
        if purpose == SIGNAL:
            self.ex.spawn_aux(self._fire_request(entry))
            return True
        if purpose == DEADLINE:  # (the run's end removes the entry)
            if self.ex.view.run.deadline is not None:
                self.ex.root.cancel(CancelReason.RUN_DEADLINE, self.ex.view.run.deadline)
            return True
        self.ex.spawn_aux(self._fire(entry, purpose))
        return True

    async def _fire(self, entry: DueEntry, purpose: DuePurpose | None) -> None:
        try:
            await self._fire_once(entry, purpose)
        finally:
            self.firing.discard(entry)

    async def _fire_request(self, entry: DueEntry) -> None:
        try:
            await self.ex.signals.answer_request(entry)
        finally:
            self.firing.discard(entry)

    async def _fire_once(self, entry: DueEntry, purpose: DuePurpose | None) -> None:
        async with self.ex.steps.hold():
            if self.ex.view.end is not None or self.ex.closed:
                return  # (the run's end removes its due entries)
            if self._awaited(entry, purpose):
                return  # (as in fire_due: the view may have changed since)
            token = self.ex.view.tokens.get(entry.token_id)
            later = False
            if token is not None:
                self.ex.committer.fired.setdefault(token.id, []).append(entry)
                later = await self._fire_entry(token, entry, purpose)
            left = self.ex.committer.fired.get(entry.token_id, [])
            if not later and entry in left:
                # Nothing was moved (the entry was stale), or the move did not write the token:
                # the entry is removed on its own.
                left.remove(entry)
                if not left:
                    self.ex.committer.fired.pop(entry.token_id, None)
                await self.ex.commit(
                    Commit(self.ex.view.run.id, due_fired=[entry]), unless_ended=True
                )
            elif token is None:
                # Its token has moved on or ended (a child's end that came late): it goes.
                await self.ex.commit(
                    Commit(self.ex.view.run.id, due_fired=[entry]), unless_ended=True
                )

    def _awaited(self, entry: DueEntry, purpose: DuePurpose | None) -> bool:
        """Whether ``entry`` tells of the end of a child its token still waits for."""
        token = self.ex.view.tokens.get(entry.token_id)
        return token is not None and awaits_child(self.ex.view.run.id, token, purpose)

    async def _fire_entry(
        self, token: TokenRecord, entry: DueEntry, purpose: DuePurpose | None
    ) -> bool:
        """Fire ``entry`` (for ``purpose``) for ``token``; True if the move is left to the
        token's own task (its next commit removes the entry)."""
        if not due_applies(token, purpose, entry.when):
            return False
        assert purpose is not None
        if purpose == RESUME:
            mark_due(token)
            token.status = S.READY
            self.ex.committer.expect[token.id] = Expect(S.WAITING, token.epoch)
            self.ex.spawn(token)
            return True
        if purpose == TIMEOUT:
            assert token.deadline is not None
            was, epoch = token.status, token.epoch
            token.status = S.READY  # claimed
            self.ex.close_park(token, ParkStatus.TIMED_OUT, "timeout")
            self.ex.committer.expect[token.id] = Expect(was, epoch)
            if was is S.PARKED:
                # (The requests recorded before the deadline are applied first.)
                self.ex.committer.fires[token.id] = token.deadline
            await self.park_timeout(token)
            return False
        # An escalation timer (an interrupting one on a running node moves the token in its
        # own task).
        return await self.fire_timer(token, purpose.index, entry.when)

    async def park_timeout(self, token: TokenRecord) -> None:
        """The window of ``token`` (claimed) ended while it was parked or waiting out a backoff:
        what a window's end does (see :meth:`TaskSteps.window_ended
        <flowtide.engine.run.executor.tasks.TaskSteps.window_ended>`), in a step of its own."""
        p = self.ex.plan.placements[token.placement]
        settings = self.ex.plan.settings[p.id]
        assert token.deadline is not None
        node_id = self.ex.plan.nodes.get(p.id, p.id)
        nxt = await self.ex.task_steps.window_ended(token, p, node_id, settings, token.deadline)
        if nxt is not None:
            self.ex.spawn(nxt)

    async def fire_timer(
        self, token: TokenRecord, index: int, when: datetime | None = None
    ) -> bool:
        """Fire escalation timer ``index`` of ``token`` (due at ``when``); True if the token's
        own task moves it (an interrupting timer of a running node)."""
        p = self.ex.plan.placements[token.placement]
        timer = (self.ex.plan.settings[p.id].timers or ())[index]
        running = self.ex.running.get(token.id)
        if (
            timer.interrupting
            and token.status is S.RUNNING
            and running is None
            and token.id not in self.ex.starting
        ):
            # The node's code has already returned and its step is being committed: the timer
            # has not fired (a park arms it again; a move drops it).
            return True
        timer_fired(token, index)
        info = FiredTimer(timer.output, index, timer.anchor.value)
        if timer.interrupting:
            if token.status is S.RUNNING:
                interrupt(token, info)
                if running is not None:
                    running[1].cancel(CancelReason.TIMER, self.ex.clock.now())
                # else: its scope is not registered yet; it is cancelled as soon as it is.
                return True
            was = token.status
            token.status = S.READY  # claimed
            self.ex.close_park(token, ParkStatus.INTERRUPTED, f"timer:{timer.output}")
            self.ex.committer.expect[token.id] = Expect(was, token.epoch)
            if was is S.PARKED and when is not None:
                self.ex.committer.fires[token.id] = when
            self.ex.view.last_placements = [p.id]
            nxt = (
                await self.ex.move(
                    Move(
                        token,
                        p,
                        timer.output,
                        event=lambda to: escalation(info, interrupting=True, to=to),
                    )
                )
            ).next
            if nxt is not None:
                self.ex.spawn(nxt)
            return False
        self.ex.committer.expect[token.id] = Expect(token.status, token.epoch)
        targets = p.route_map().get(timer.output)
        to = list(targets) if targets else None
        ev = self.ex.event(token, escalation(info, interrupting=False, to=to))
        await self.side_tokens(token, p, timer.output, ev)
        return False

    async def side_tokens(
        self, token: TokenRecord, p: AnyPlacement, output: str, ev: EventRecord
    ) -> None:
        """A non-interrupting timer: new tokens start on ``output``; ``token`` stays. (``ev``,
        its ``timer_fired``, already says where they go.)"""
        targets = p.route_map().get(output)
        if not targets:
            err = UnroutedOutputError(p.id, output, list(p.route_map()))
            await self.ex.commit(
                Commit(self.ex.view.run.id, tokens=[token], events=[ev]), unless_ended=True
            )
            self.ex.request_end(Lifecycle.FAILED, [self.ex.error_info(err, p.id)])
            return
        new = [self.ex.new_token(t, token.lineage) for t in targets]
        for t in new:
            mark_side(t)  # (its terminal does not set the run's outcome)
        ok = await self.ex.commit(
            Commit(self.ex.view.run.id, tokens=[token, *new], events=[ev]),
            unless_ended=True,
            token=token,
        )
        if not ok:
            for t in new:
                self.ex.view.tokens.pop(t.id, None)
            return
        for t in new:
            self.ex.spawn(t)
