"""Parked and waiting tokens moved from outside the run: signals, park deadlines, escalation timers
and due waits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flowtide.engine.errors import (
    SignalRefused,
    UnroutedOutputError,
)
from flowtide.engine.event_types import Signalled
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.requests._addressing import find_park
from flowtide.engine.requests._signals import (
    accepted_reply,
    refusal,
    refused_reply,
    signal_answer,
)
from flowtide.engine.run.due import (
    DEADLINE,
    RESUME,
    SIGNAL,
    TIMEOUT,
    DuePurpose,
    parse_purpose,
)
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.executor.records import end_reason, escalation
from flowtide.engine.run.marks import (
    FiredTimer,
    interrupt,
    mark_due,
    mark_side,
    timer_fired,
    wake,
)
from flowtide.engine.run.move import Move
from flowtide.engine.run.parking import due_applies, signalled_token
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.placements import (
    AnyPlacement,
)
from flowtide.printable import printable
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    ParkRecord,
    ParkStatus,
    RequestAnswer,
    SignalAnswer,
    SignalRequest,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
log = logging.getLogger("flowtide.engine")


def _signalled(
    park: ParkRecord, output: str | None, key: str | None, keys: list[str], sender: str | None
) -> Callable[[list[str] | None], Signalled]:
    """The ``signalled`` event of a signal, once it is known where the token moved (``to``)."""

    def event(to: list[str] | None) -> Signalled:
        return Signalled(
            output=output, idempotency_key=key, keys=keys, park=park.id, to=to, sender=sender
        )

    return event


class Parking(RunCore):
    """Signals and due instants."""

    async def signal(
        self,
        park: ParkRecord,
        *,
        payload: Mapping[str, Any],
        output: str | None,
        idempotency_key: str | None,
        inbox: DueEntry | None = None,
        at: datetime | None = None,
        sender: str | None = None,
    ) -> dict[str, Any]:
        """Apply a signal to ``park`` (open in this executor), judged at ``at`` (a request's
        recorded instant; default now: the deadline must come after it); returns the answer.
        ``inbox``: the due entry of the request it answers, fired and answered by its commit.
        One step, under the step lock."""
        async with self.steps.hold():
            now = self.clock.now()
            judged = at if at is not None else now
            v = self.view
            token = signalled_token(
                self.plan, v.tokens, v.parks, v.recent_parks, park, output, judged
            )
            p = self.plan.placements[token.placement]
            epoch = token.epoch
            token.status = S.READY  # claimed
            self.close_park(token, ParkStatus.SIGNALLED, "signal")
            self.committer.expect[token.id] = Expect(S.PARKED, epoch, alive_at=judged)
            answer = signal_answer(park, output, now, idempotency_key)
            answers = (
                [SignalAnswer(idempotency_key, self.view.run.id, answer)] if idempotency_key else []
            )
            fired = [inbox] if inbox is not None else []
            requests = [RequestAnswer(e.token_id, accepted_reply(answer), now) for e in fired]
            keys = sorted(payload)

            signalled = _signalled(park, output, idempotency_key, keys, sender)

            base = dict(self.view.state)

            def update() -> tuple[dict[str, Any], list[str]]:
                return (
                    self.merger.apply(self.view.state, base, {}, [], payload)
                    if payload
                    else ({}, [])
                )

            try:
                if output is not None:
                    self.view.last_placements = [p.id]
                    moved = await self.move(
                        Move(
                            token,
                            p,
                            output,
                            event=signalled,
                            update=update,
                            answers=answers,
                            requests=requests,
                            fired=fired,
                        )
                    )
                    if moved.next is not None:
                        self.spawn(moved.next)
                    applied = moved.committed
                else:
                    ev = self.event(token, signalled(None))
                    done = Commit(
                        self.view.run.id,
                        signal_answers=answers,
                        requests_answered=requests,
                        due_fired=fired,
                    )
                    applied = await self._wake(token, payload, ev, update, done)
            except StoreConflict:
                self.committer.expect.pop(token.id, None)
                raise
            if applied:
                return answer
            raise self._ended_first(token, park, now)

    def _ended_first(self, token: TokenRecord, park: ParkRecord, now: datetime) -> SignalRefused:
        """The run ended (a cancel, a failure elsewhere) before the signal to ``park`` could
        commit: the park is closed as cancelled (with the next commit), and the signal refused."""
        self.committer.expect.pop(token.id, None)
        closed = self.view.recent_parks.get(park.id) or park
        closed.status = ParkStatus.CANCELLED
        end = self.view.end
        closed.closed_by = end_reason(end) if end is not None else "run_ended"
        if closed not in self.committer.closing_parks:
            self.committer.closing_parks.append(closed)
        return refusal(closed, now)

    async def _wake(
        self,
        token: TokenRecord,
        payload: Mapping[str, Any],
        event: EventRecord,
        update: Callable[[], tuple[dict[str, Any], list[str]]],
        done: Commit,
    ) -> bool:
        """A signal without an output: the node runs again, ``ctx.signal`` its payload.
        ``done``: what the signal answers and fires, committed with the wake."""
        wake(token, payload)
        token.epoch += 1
        done.tokens = [token]
        done.events = [event]
        done.due_dropped = [(token.id, TIMEOUT.format())]
        started = self._start_woken(token, done)
        try:
            ok = await self.commit(
                done,
                unless_ended=True,
                update=update,
                token=token,
            )
        except BaseException:
            if started:
                self.token_attempts.not_started(token.id)
            raise
        if started:
            if not ok:
                self.token_attempts.not_started(token.id)
            else:
                self.prestarted.add(token.id)
        if ok:
            self.spawn(token)
        return ok

    def _start_woken(self, token: TokenRecord, done: Commit) -> bool:
        """One commit for a wake: it also starts the node's next attempt (as a move starts
        the attempt it leads to), unless it must wait for a thread; whether it does. A crash
        after it runs the attempt again, with the same number and the signal still on the
        token."""
        p = self.plan.placements[token.placement]
        if p.kind != "task" or not self.host.executes:
            return False
        if not self.attempts.take_thread_now(token.id, self.code.impls[p.id]):
            return False  # (it starts once a thread is free for it)
        begun, anchors, due = self.arming.start_attempt(
            token, p.id, self.plan.nodes[p.id], self.plan.settings[p.id]
        )
        done.events = [*done.events, begun]
        done.anchors = anchors
        done.due = due
        return True

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
        the run is ending, which removes it)."""
        if self.view.end is not None or self.closed or entry in self.firing:
            return False
        self.firing.add(entry)
        if purpose == SIGNAL:
            self.spawn_aux(self._fire_request(entry))
            return True
        if purpose == DEADLINE:  # (the run's end removes the entry)
            if self.view.run.deadline is not None:
                self.root.cancel(CancelReason.RUN_DEADLINE, self.view.run.deadline)
            return True
        self.spawn_aux(self._fire(entry, purpose))
        return True

    async def _fire(self, entry: DueEntry, purpose: DuePurpose | None) -> None:
        try:
            await self._fire_once(entry, purpose)
        finally:
            self.firing.discard(entry)

    async def _fire_request(self, entry: DueEntry) -> None:
        try:
            await self.answer_request(entry)
        finally:
            self.firing.discard(entry)

    async def answer_request(self, entry: DueEntry) -> None:
        """A request another engine recorded for this run (see
        :mod:`flowtide.engine.requests.inbox`), applied by its holder, under the step lock from
        its first look (the requests fired before a deadline's entry are applied before it). A
        signal is applied as if sent at the instant the request was recorded, its answer
        committed with the signal's step; a refusal's answer is committed alone. A cancel
        cancels the run, whose end answers it. ``entry`` (its due entry, ``token_id`` the
        request's id) is removed by that commit. (A
        conflict, DuplicateSignal too, drops this view: the run is rebuilt, and the request
        fired again.)"""
        async with self.steps.hold():
            try:
                found = await self._addressed(entry)
            except StoreConflict:
                raise
            except StoreError as exc:
                request, run = printable(entry.token_id), printable(self.view.run.id)
                log.warning("request %s of run %s: %s", request, run, exc)
                return  # (the entry stays: fired again at the next claim)
            if isinstance(found, SignalRequest):
                # A cancel: the run's end answers it (and removes its entry).
                self.cancels.append(found.id)
                asked = found.request
                self.root.cancel(
                    CancelReason.ABORT, self.clock.now(), asked.get("reason"), asked.get("sender")
                )
                return
            if isinstance(found, dict):
                reply: dict[str, Any] | None = found
            elif found is None:
                reply = None
            else:
                park, asked, at = found
                try:
                    await self.signal(
                        park,
                        payload=asked.get("payload") or {},
                        output=asked.get("output"),
                        idempotency_key=asked.get("idempotency_key"),
                        inbox=entry,
                        at=at,
                        sender=asked.get("sender"),
                    )
                    return
                except SignalRefused as refused:
                    reply = refused_reply(refused)
            answered = [RequestAnswer(entry.token_id, reply, self.clock.now())] if reply else []
            await self.commit(
                Commit(self.view.run.id, due_fired=[entry], requests_answered=answered),
                unless_ended=True,
            )

    async def _addressed(
        self, entry: DueEntry
    ) -> tuple[ParkRecord, dict[str, Any], datetime] | dict[str, Any] | SignalRequest | None:
        """What a request asks: the park a signal addresses, what it asks and the instant it
        was recorded; or its answer, if it is known without a step (a refusal, or the first
        answer to its idempotency key); a cancel request itself; or None if it is answered
        already (or not this run's)."""
        store = self.host.store
        request = await store.signal_request(entry.token_id)
        if request is None or request.answer is not None or request.run_id != self.view.run.id:
            return None
        if request.kind == "cancel":
            return request
        asked = request.request
        key = asked.get("idempotency_key")
        first = await store.signal_answer(key) if key is not None else None
        if first is not None:
            return accepted_reply(first.answer, duplicate=True)
        try:
            park = await find_park(
                store,
                self,
                request.requested_at,
                self.view.run.id,
                asked.get("placement"),
                asked.get("key"),
                asked.get("token_id"),
            )
        except SignalRefused as refused:
            return refused_reply(refused)
        return park, asked, request.requested_at

    async def _fire_once(self, entry: DueEntry, purpose: DuePurpose | None) -> None:
        async with self.steps.hold():
            if self.view.end is not None or self.closed:
                return  # (the run's end removes its due entries)
            token = self.view.tokens.get(entry.token_id)
            later = False
            if token is not None:
                self.committer.fired.setdefault(token.id, []).append(entry)
                later = await self._fire_entry(token, entry, purpose)
            left = self.committer.fired.get(entry.token_id, [])
            if not later and entry in left:
                # Nothing was moved (the entry was stale), or the move did not write the token:
                # the entry is removed on its own.
                left.remove(entry)
                if not left:
                    self.committer.fired.pop(entry.token_id, None)
                await self.commit(Commit(self.view.run.id, due_fired=[entry]), unless_ended=True)
            elif token is None:
                # Its token has moved on or ended (a child's end that came late): it goes.
                await self.commit(Commit(self.view.run.id, due_fired=[entry]), unless_ended=True)

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
            self.committer.expect[token.id] = Expect(S.WAITING, token.epoch)
            self.spawn(token)
            return True
        if purpose == TIMEOUT:
            assert token.deadline is not None
            was, epoch = token.status, token.epoch
            token.status = S.READY  # claimed
            self.close_park(token, ParkStatus.TIMED_OUT, "timeout")
            self.committer.expect[token.id] = Expect(was, epoch)
            if was is S.PARKED:
                # (The requests recorded before the deadline are applied first.)
                self.committer.fires[token.id] = token.deadline
            await self.park_timeout(token)
            return False
        # An escalation timer (an interrupting one on a running node moves the token in its
        # own task).
        return await self.fire_timer(token, purpose.index, entry.when)

    async def park_timeout(self, token: TokenRecord) -> None:
        """The window of ``token`` (claimed) ended while it was parked or waiting out a backoff:
        what a window's end does (see :meth:`TaskSteps.window_ended
        <flowtide.engine.run.executor.tasks.TaskSteps.window_ended>`), in a step of its own."""
        p = self.plan.placements[token.placement]
        settings = self.plan.settings[p.id]
        assert token.deadline is not None
        node_id = self.plan.nodes.get(p.id, p.id)
        nxt = await self.task_steps.window_ended(token, p, node_id, settings, token.deadline)
        if nxt is not None:
            self.spawn(nxt)

    async def fire_timer(
        self, token: TokenRecord, index: int, when: datetime | None = None
    ) -> bool:
        """Fire escalation timer ``index`` of ``token`` (due at ``when``); True if the token's
        own task moves it (an interrupting timer of a running node)."""
        p = self.plan.placements[token.placement]
        timer = (self.plan.settings[p.id].timers or ())[index]
        running = self.running.get(token.id)
        if (
            timer.interrupting
            and token.status is S.RUNNING
            and running is None
            and token.id not in self.starting
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
                    running[1].cancel(CancelReason.TIMER, self.clock.now())
                # else: its scope is not registered yet; it is cancelled as soon as it is.
                return True
            was = token.status
            token.status = S.READY  # claimed
            self.close_park(token, ParkStatus.INTERRUPTED, f"timer:{timer.output}")
            self.committer.expect[token.id] = Expect(was, token.epoch)
            if was is S.PARKED and when is not None:
                self.committer.fires[token.id] = when
            self.view.last_placements = [p.id]
            nxt = (
                await self.move(
                    Move(
                        token,
                        p,
                        timer.output,
                        event=lambda to: escalation(info, interrupting=True, to=to),
                    )
                )
            ).next
            if nxt is not None:
                self.spawn(nxt)
            return False
        self.committer.expect[token.id] = Expect(token.status, token.epoch)
        targets = p.route_map().get(timer.output)
        to = list(targets) if targets else None
        ev = self.event(token, escalation(info, interrupting=False, to=to))
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
            await self.commit(
                Commit(self.view.run.id, tokens=[token], events=[ev]), unless_ended=True
            )
            self.request_end(Lifecycle.FAILED, [self.error_info(err, p.id)])
            return
        new = [self.new_token(t, token.lineage) for t in targets]
        for t in new:
            mark_side(t)  # (its terminal does not set the run's outcome)
        ok = await self.commit(
            Commit(self.view.run.id, tokens=[token, *new], events=[ev]),
            unless_ended=True,
            token=token,
        )
        if not ok:
            for t in new:
                self.view.tokens.pop(t.id, None)
            return
        for t in new:
            self.spawn(t)
