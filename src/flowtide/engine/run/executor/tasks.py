"""Task, wait and terminal placements: an attempt's start, what follows it (a move, a park, a
retry, a timeout, a failure), waits and terminals. A part the executor holds
(:class:`TaskSteps`), calling back only through :class:`TaskHost`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from flowtide.authoring.nodes import NodeImplementation
from flowtide.clock import isoformat
from flowtide.engine.errors import (
    FailedTerminalError,
    NodeTimeoutError,
    UndeclaredOutputError,
)
from flowtide.engine.event_types import (
    NodeFailed,
    NodeFinished,
    NodeRetried,
    Parked,
    TerminalReached,
    TimerFired,
    WaitStarted,
)
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.flows.contracts import OutputContractError
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import InterruptedAt
from flowtide.engine.run.attempts import Attempt, AttemptCall, AttemptRunner
from flowtide.engine.run.committer import Committer
from flowtide.engine.run.due import RESUME, TIMEOUT
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.executor.ports import EndPort, MovePort, StepPort
from flowtide.engine.run.executor.records import escalation, timed_out
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.marks import (
    Waiting,
    drop_signal,
    is_due,
    last_backoff,
    sets_outcome,
    signal_of,
    take_due,
    take_interrupt,
    wait_for,
)
from flowtide.engine.run.move import Move
from flowtide.engine.timing.retry import backoff_delay, matches_retry_on, should_retry
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.placements import (
    TIMEOUT_OUTPUT,
    AnyPlacement,
    Phase,
    Task,
    Terminal,
    Wait,
)
from flowtide.model.settings import NodeSettings
from flowtide.store.base import (
    Commit,
    EventRecord,
    ParkRecord,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class TaskEngine(Protocol):
    """What task steps need of the engine: the random source of a retry's jittered backoff,
    and the sweeper to wake for a wait's or a backoff's due instant."""

    @property
    def random(self) -> random.Random | None: ...

    def wake_sweeper(self, when: datetime | None = None) -> None: ...


class TaskHost(StepPort, MovePort, EndPort, Protocol):
    """What task, wait and terminal placements need of the executor besides a step and a move:
    the node code and its attempts, the step lock, arming, the join groups, the engine (its
    sweeper and randomness), and ending the run."""

    @property
    def host(self) -> TaskEngine: ...

    @property
    def code(self) -> FlowCode: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def joins(self) -> Joins: ...

    @property
    def prestarted(self) -> set[str]: ...

    @property
    def committer(self) -> Committer: ...

    def fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Start:
    """An attempt to start: ``token``'s at ``placement``, of ``node``."""

    token: TokenRecord
    placement: str
    node: str
    settings: NodeSettings


class TaskSteps:
    """What a token does at a task, wait or terminal placement, through ``ex``: an attempt's
    start and what follows it (a move, a park, a retry, a window's end, a failure)."""

    def __init__(self, ex: TaskHost) -> None:
        self.ex = ex
        self.queued: dict[str, _Start] = {}
        """The attempts whose start waits for the run's step lock (see :meth:`start`)."""

    def at_task(self, token: TokenRecord, p: Task) -> Coroutine[Any, Any, TokenRecord | None]:
        """The token's step at task ``p``: its node's attempt and what follows it. (The step's
        coroutine itself: no frame more per step.)"""
        ex = self.ex
        return self.node_step(token, p, ex.code.impls[p.id], ex.plan.settings[p.id])

    async def at_phase(self, token: TokenRecord, p: Phase) -> TokenRecord | None:
        ex = self.ex
        # A phase reached by a route (validation should prevent it): run it like a dead end.
        ex.view.last_placements.append(p.id)
        token.status = S.DONE
        ex.view.tokens.pop(token.id, None)
        await ex.commit(Commit(ex.view.run.id, tokens=[token]), unless_ended=True)
        await ex.joins.token_ended(token)
        return None

    async def node_step(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        impl: NodeImplementation,
        settings: NodeSettings,
    ) -> TokenRecord | None:
        ex = self.ex
        signal = signal_of(token)  # (the payload of the signal that woke it, if one did)
        if token.id in ex.prestarted:
            # The commit that moved the token here also started this attempt.
            ex.prestarted.discard(token.id)
        else:
            # A sync node starts once a thread is free for it: its window is its code's.
            if (
                ex.attempts.needs_thread(impl)
                and await ex.attempts.wait_for_thread(token.id, ex.root) is not None
            ):
                return None  # (the run ended meanwhile)
            if not await self.start(_Start(token, p.id, impl.id, settings)):
                return None
        base = dict(ex.view.state)
        call = AttemptCall(
            impl=impl,
            settings=settings,
            placement=p.id,
            state=base,
            parent=ex.root,
            key=token.id,
            attempt=token.attempt,
            visit=token.visit,
            deadline=token.deadline,
            signal=signal,
        )
        attempt = await ex.token_attempts.invoke(call, token)
        return await self.after_attempt(token, p, impl.id, settings, base, attempt)

    async def start(self, start: _Start) -> bool:
        """Commit the start of a token's attempt (it holds its thread slot, if it needs one);
        False if the run ended or the token was cancelled first.

        Starts queued behind the run's step lock are one step: the first of them to hold the
        lock starts every attempt queued then, in its one commit, and each of the others goes
        on once that commit is stored."""
        ex, token = self.ex, start.token
        self.queued[token.id] = start
        after = None
        try:
            async with ex.steps.hold():
                self.queued.pop(token.id, None)
                if token.id in ex.prestarted:  # (the step of a start queued before it)
                    ex.prestarted.discard(token.id)
                    after = ex.committer.unsent()
                elif ex.view.end is not None or token.status is S.CANCELLED:
                    ex.attempts.drop_thread(token.id)
                    return False
                elif not await self._start_queued(start):
                    return False
        finally:
            self.queued.pop(token.id, None)
        if after is not None:
            await asyncio.shield(after)
        return True

    async def _start_queued(self, first: _Start) -> bool:
        """One step: the start of ``first`` and of every other attempt queued to start."""
        ex = self.ex
        others = [q for q in self.queued.values() if q.token.status is not S.CANCELLED]
        self.queued.clear()
        tokens, events, anchors, due = [], [], [], []
        for q in (first, *others):
            t = q.token
            if take_due(t) is Waiting.RETRY:
                events.append(ex.event(t, TimerFired(purpose="retry")))
            started, new_anchors, new_due = ex.arming.start_attempt(
                t, q.placement, q.node, q.settings
            )
            tokens.append(t)
            events.append(started)
            anchors.extend(new_anchors)
            due.extend(new_due)
        c = Commit(ex.view.run.id, tokens=tokens, events=events, anchors=anchors, due=due)
        if not await ex.commit(c, unless_ended=True):
            for t in tokens:
                ex.token_attempts.not_started(t.id)
            return False
        ex.prestarted.update(q.token.id for q in others)
        return True

    async def after_attempt(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
    ) -> TokenRecord | None:
        """What follows a finished attempt.

        One step, under the step lock."""
        ex = self.ex
        async with ex.steps.hold():
            if ex.view.end is not None or token.status is S.CANCELLED:
                return None
            if attempt.kind == "cancelled":
                interrupt = take_interrupt(token)
                c = attempt.cancellation
                if interrupt is not None and c is not None and c.reason is CancelReason.TIMER:
                    ex.view.last_placements = [p.id]
                    return (
                        await ex.move(
                            Move(
                                token,
                                p,
                                interrupt.output,
                                event=lambda to: escalation(interrupt, interrupting=True, to=to),
                            )
                        )
                    ).next
                return None
            if attempt.kind == "park":
                return await self.park(token, p, node_id, settings, base, attempt)
            if attempt.kind == "ok":
                output = attempt.output
                assert output is not None
                ex.view.last_placements = [p.id]
                return (
                    await ex.move(
                        Move(
                            token,
                            p,
                            output,
                            event=lambda to: NodeFinished(output=output, to=to),
                            update=lambda: ex.token_attempts.state_update(base, attempt),
                        )
                    )
                ).next
            if attempt.kind == "timeout":
                assert attempt.deadline is not None
                return await self.window_ended(token, p, node_id, settings, attempt.deadline)
            return await self._failed(token, p, settings, attempt)

    async def window_ended(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        deadline: datetime,
    ) -> TokenRecord | None:
        """The token's window ended at ``deadline`` (its attempt's, or its park's): a retry (if
        asked for), the ``timeout`` route, or the run fails. Under the step lock."""
        ex = self.ex
        budget = settings.timeout
        assert budget is not None
        timeout_err = NodeTimeoutError(node_id, p.id, budget)
        routed = TIMEOUT_OUTPUT in p.route_map()
        late = timed_out(budget, deadline, routed)
        rearmed = ex.arming.fixed_window_end(p.id, settings, ex.clock.now()) is None
        # (A window that does not rearm is over for every later attempt too.)
        if rearmed and self.retry_allowed(token, settings, timeout_err, explicit_only=True):
            await self.schedule_retry(token, settings, timeout_err, ex.event(token, late))
            return None
        if routed:
            ex.view.last_placements = [p.id]
            return (
                await ex.move(
                    Move(
                        token,
                        p,
                        TIMEOUT_OUTPUT,
                        event=lambda to: timed_out(budget, deadline, routed, to),
                    )
                )
            ).next
        interrupted = InterruptedAt("timeout", p.id, deadline, (p.id,))
        await self._fail(token, ex.event(token, late), timeout_err, interrupted)
        return None

    async def _failed(
        self, token: TokenRecord, p: AnyPlacement, settings: NodeSettings, attempt: Attempt
    ) -> TokenRecord | None:
        """The attempt raised: the ``error`` route for a broken output contract, a retry, or the
        run fails."""
        ex = self.ex
        exc = attempt.error
        assert exc is not None
        if isinstance(exc, OutputContractError) and "error" in p.route_map():
            error = ex.error_data(exc)
            ex.view.last_placements = [p.id]
            return (
                await ex.move(
                    Move(token, p, "error", event=lambda to: NodeFailed(error=error, to=to))
                )
            ).next
        ev = ex.event(token, NodeFailed(error=ex.error_data(exc)))
        retryable = not isinstance(exc, UndeclaredOutputError | OutputContractError)
        if retryable and self.retry_allowed(token, settings, exc):
            await self.schedule_retry(token, settings, exc, ev)
            return None
        await self._fail(token, ev, exc)
        return None

    async def _fail(
        self,
        token: TokenRecord,
        event: EventRecord,
        exc: BaseException,
        interrupted: InterruptedAt | None = None,
    ) -> None:
        """Record the token's failure (its due entries dropped), then fail the run."""
        ex = self.ex
        token.status = S.FAILED
        failed = Commit(ex.view.run.id, tokens=[token], events=[event], due_cleared=[token.id])
        if await ex.commit(failed, unless_ended=True):
            ex.fail_token(token, exc, interrupted)

    async def park(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
    ) -> TokenRecord | None:
        ex = self.ex
        request = attempt.park
        assert request is not None
        now = ex.clock.now()
        drop_signal(token)
        anchors, due = ex.arming.arm(token, p.id, settings, now)
        if token.deadline is not None and token.deadline <= now:
            # (Its window is over before it could park: what the park's timeout would do.)
            return await self.window_ended(token, p, node_id, settings, token.deadline)
        token.status = S.PARKED
        token.epoch += 1
        park = ParkRecord(
            f"{token.id}#{token.epoch}",
            ex.view.run.id,
            token.id,
            p.id,
            token.visit,
            token.epoch,
            now,
            token.deadline,
            request.key,
            request.payload,
        )
        if token.deadline is not None:
            # First in the commit: at the same instant as a timer, the timeout is claimed first.
            due.insert(0, TIMEOUT.entry(token.deadline, ex.view.run.id, token.id))
        ev = ex.event(
            token,
            Parked(
                key=request.key,
                deadline=isoformat(token.deadline) if token.deadline else None,
                park=park.id,
            ),
        )
        ex.view.parks[token.id] = park
        ok = await ex.commit(
            Commit(
                ex.view.run.id,
                tokens=[token],
                events=[ev],
                due=due,
                anchors=anchors,
                parks=[park],
            ),
            unless_ended=True,
            update=lambda: ex.token_attempts.state_update(base, attempt),
            token=token,
            last=True,
        )
        if not ok:
            ex.view.parks.pop(token.id, None)
        return None

    def retry_allowed(
        self,
        token: TokenRecord,
        settings: NodeSettings,
        exc: BaseException,
        explicit_only: bool = False,
    ) -> bool:
        policy = settings.retry
        if policy is None:
            return False
        if explicit_only and not (policy.retry_on and matches_retry_on(exc, policy.retry_on)):
            return False
        return should_retry(policy, exc, token.attempt)

    async def schedule_retry(
        self, token: TokenRecord, settings: NodeSettings, exc: BaseException, ev: EventRecord
    ) -> None:
        ex = self.ex
        policy = settings.retry
        assert policy is not None

        delay = backoff_delay(
            policy, token.attempt, previous=last_backoff(token), rng=ex.host.random
        )
        now = ex.clock.now()
        due = now + delay
        # A window anchored at the run's start or the first arrival does not wait for the next
        # attempt: it ends when it ends, also during the backoff.
        window_end = ex.arming.fixed_window_end(token.placement, settings, now)
        failed_attempt = token.attempt
        token.attempt += 1
        token.status = S.WAITING
        token.due = due
        token.deadline = window_end
        wait_for(token, Waiting.RETRY, delay)
        dues = [RESUME.entry(due, ex.view.run.id, token.id)]
        if window_end is not None and window_end < due:
            dues.insert(0, TIMEOUT.entry(window_end, ex.view.run.id, token.id))
        retried = ex.event(
            token,
            NodeRetried(
                due=isoformat(due),
                next_attempt=token.attempt,
                delay=delay.total_seconds(),
                error=type(exc).__name__,
            ),
            attempt=failed_attempt,
        )
        if await ex.commit(
            Commit(
                ex.view.run.id,
                tokens=[token],
                events=[ev, retried],
                due=dues,
            ),
            unless_ended=True,
        ):
            ex.host.wake_sweeper(dues[0].when)

    async def at_wait(self, token: TokenRecord, p: Wait) -> TokenRecord | None:
        ex = self.ex
        if is_due(token, Waiting.WAIT):
            ex.view.last_placements = [p.id]
            return (
                await ex.move(
                    Move(
                        token,
                        p,
                        "elapsed",
                        event=lambda to: TimerFired(purpose="wait", output="elapsed", to=to),
                    )
                )
            ).next
        now = ex.clock.now()
        due = p.until if p.until is not None else now + (p.duration or (now - now))
        token.status = S.WAITING
        token.due = due
        wait_for(token, Waiting.WAIT)
        if await ex.commit(
            Commit(
                ex.view.run.id,
                tokens=[token],
                events=[ex.event(token, WaitStarted(due=isoformat(due)))],
                due=[RESUME.entry(due, ex.view.run.id, token.id)],
            ),
            unless_ended=True,
        ):
            ex.host.wake_sweeper(due)
        return None

    async def at_terminal(self, token: TokenRecord, p: Terminal) -> TokenRecord | None:
        ex = self.ex
        token.status = S.DONE
        ex.view.tokens.pop(token.id, None)
        ev = ex.event(token, TerminalReached(outcome=p.outcome))
        if not await ex.commit(
            Commit(ex.view.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        ex.view.terminals.append(p.id)
        if p.fails:
            ex.request_end(Lifecycle.FAILED, [ex.error_info(FailedTerminalError(p.id))])
        elif ex.view.outcome is None and sets_outcome(token):
            ex.view.outcome = p.outcome
        await ex.joins.token_ended(token)
        return None
