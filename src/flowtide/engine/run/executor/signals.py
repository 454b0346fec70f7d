"""Signals: a signal applied to a parked token (it moves on along an output, or its node runs
again with the signal's payload), and a request another engine recorded for the run answered
(a signal, a refusal, a cancel). A part the executor holds (:class:`Signals`), calling back only
through :class:`SignalHost`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from flowtide.engine.errors import SignalRefused
from flowtide.engine.event_types import Signalled
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.requests._addressing import find_park
from flowtide.engine.requests._signals import accepted_reply, refusal, refused_reply, signal_answer
from flowtide.engine.run.attempts import AttemptRunner
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import TIMEOUT
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.ports import MovePort, StepPort
from flowtide.engine.run.executor.records import end_reason
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.marks import wake
from flowtide.engine.run.move import Move
from flowtide.engine.run.parking import signalled_token
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.scope import CancelReason
from flowtide.engine.worker._host import RunHost
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


class SignalHost(StepPort, MovePort, Protocol):
    """What signals need of the executor besides a step and a move: the engine, the node code
    and its attempts, the step lock, arming, the committer (what the next commits expect), closing
    a park, its cancel requests, and spawning a token's task."""

    @property
    def host(self) -> RunHost: ...

    @property
    def code(self) -> FlowCode: ...

    @property
    def merger(self) -> StateMerger: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def committer(self) -> Committer: ...

    @property
    def prestarted(self) -> set[str]: ...

    @property
    def cancels(self) -> list[str]: ...

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None: ...

    def spawn(self, token: TokenRecord) -> None: ...


class Signals:
    """Signals to the run's parked tokens and requests recorded for it, through ``ex``."""

    def __init__(self, ex: SignalHost) -> None:
        self.ex = ex

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
        async with self.ex.steps.hold():
            now = self.ex.clock.now()
            judged = at if at is not None else now
            v = self.ex.view
            token = signalled_token(
                self.ex.plan, v.tokens, v.parks, v.recent_parks, park, output, judged
            )
            p = self.ex.plan.placements[token.placement]
            epoch = token.epoch
            token.status = S.READY  # claimed
            self.ex.close_park(token, ParkStatus.SIGNALLED, "signal")
            self.ex.committer.expect[token.id] = Expect(S.PARKED, epoch, alive_at=judged)
            answer = signal_answer(park, output, now, idempotency_key)
            answers = [SignalAnswer(idempotency_key, v.run.id, answer)] if idempotency_key else []
            fired = [inbox] if inbox is not None else []
            requests = [RequestAnswer(e.token_id, accepted_reply(answer), now) for e in fired]
            keys = sorted(payload)

            signalled = _signalled(park, output, idempotency_key, keys, sender)

            base = dict(self.ex.view.state)

            def update() -> tuple[dict[str, Any], list[str]]:
                return (
                    self.ex.merger.apply(self.ex.view.state, base, {}, [], payload)
                    if payload
                    else ({}, [])
                )

            try:
                if output is not None:
                    self.ex.view.last_placements = [p.id]
                    moved = await self.ex.move(
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
                        self.ex.spawn(moved.next)
                    applied = moved.committed
                else:
                    ev = self.ex.event(token, signalled(None))
                    done = Commit(
                        self.ex.view.run.id,
                        signal_answers=answers,
                        requests_answered=requests,
                        due_fired=fired,
                    )
                    applied = await self._wake(token, payload, ev, update, done)
            except StoreConflict:
                self.ex.committer.expect.pop(token.id, None)
                raise
            if applied:
                return answer
            raise self._ended_first(token, park, now)

    def _ended_first(self, token: TokenRecord, park: ParkRecord, now: datetime) -> SignalRefused:
        """The run ended (a cancel, a failure elsewhere) before the signal to ``park`` could
        commit: the park is closed as cancelled (with the next commit), and the signal refused."""
        self.ex.committer.expect.pop(token.id, None)
        closed = self.ex.view.recent_parks.get(park.id) or park
        closed.status = ParkStatus.CANCELLED
        end = self.ex.view.end
        closed.closed_by = end_reason(end) if end is not None else "run_ended"
        if closed not in self.ex.committer.closing_parks:
            self.ex.committer.closing_parks.append(closed)
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
            ok = await self.ex.commit(
                done,
                unless_ended=True,
                update=update,
                token=token,
            )
        except BaseException:
            if started:
                self.ex.token_attempts.not_started(token.id)
            raise
        if started:
            if not ok:
                self.ex.token_attempts.not_started(token.id)
            else:
                self.ex.prestarted.add(token.id)
        if ok:
            self.ex.spawn(token)
        return ok

    def _start_woken(self, token: TokenRecord, done: Commit) -> bool:
        """One commit for a wake: it also starts the node's next attempt (as a move starts
        the attempt it leads to), unless it must wait for a thread; whether it does. A crash
        after it runs the attempt again, with the same number and the signal still on the
        token."""
        p = self.ex.plan.placements[token.placement]
        if p.kind != "task" or not self.ex.host.executes:
            return False
        if not self.ex.attempts.take_thread_now(token.id, self.ex.code.impls[p.id]):
            return False  # (it starts once a thread is free for it)
        begun, anchors, due = self.ex.arming.start_attempt(
            token, p.id, self.ex.plan.nodes[p.id], self.ex.plan.settings[p.id]
        )
        done.events = [*done.events, begun]
        done.anchors = anchors
        done.due = due
        return True

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
        async with self.ex.steps.hold():
            # (What it reads of the store must include what this run's steps held back.)
            await self.ex.committer.flush()
            try:
                found = await self._addressed(entry)
            except StoreConflict:
                raise
            except StoreError as exc:
                request, run = printable(entry.token_id), printable(self.ex.view.run.id)
                log.warning("request %s of run %s: %s", request, run, exc)
                return  # (the entry stays: fired again at the next claim)
            if isinstance(found, SignalRequest):
                # A cancel: the run's end answers it (and removes its entry).
                self.ex.cancels.append(found.id)
                asked = found.request
                self.ex.root.cancel(
                    CancelReason.ABORT,
                    self.ex.clock.now(),
                    asked.get("reason"),
                    asked.get("sender"),
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
            answered = [RequestAnswer(entry.token_id, reply, self.ex.clock.now())] if reply else []
            await self.ex.commit(
                Commit(self.ex.view.run.id, due_fired=[entry], requests_answered=answered),
                unless_ended=True,
            )

    async def _addressed(
        self, entry: DueEntry
    ) -> tuple[ParkRecord, dict[str, Any], datetime] | dict[str, Any] | SignalRequest | None:
        """What a request asks: the park a signal addresses, what it asks and the instant it
        was recorded; or its answer, if it is known without a step (a refusal, or the first
        answer to its idempotency key); a cancel request itself; or None if it is answered
        already (or not this run's)."""
        store = self.ex.host.store
        request = await store.signal_request(entry.token_id)
        if request is None or request.answer is not None or request.run_id != self.ex.view.run.id:
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
                self.ex.view,
                request.requested_at,
                self.ex.view.run.id,
                asked.get("placement"),
                asked.get("key"),
                asked.get("token_id"),
            )
        except SignalRefused as refused:
            return refused_reply(refused)
        return park, asked, request.requested_at
