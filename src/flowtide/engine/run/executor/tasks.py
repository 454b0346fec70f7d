"""Task, wait and terminal placements: an attempt's start, what follows it (a move, a park, a
retry, a timeout, a failure), waits and terminals.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

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
from flowtide.engine.flows.contracts import OutputContractError
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import InterruptedAt
from flowtide.engine.run.attempts import Attempt, AttemptCall
from flowtide.engine.run.due import RESUME, TIMEOUT
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.executor.records import escalation, timed_out
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


class Tasks(RunCore):
    """Placements that run a node or wait."""

    async def at_task(self, token: TokenRecord, p: Task) -> TokenRecord | None:
        impl = self.code.impls[p.id]
        settings = self.plan.settings[p.id]
        return await self.node_step(token, p, impl, settings)

    async def at_phase(self, token: TokenRecord, p: Phase) -> TokenRecord | None:
        # A phase reached by a route (validation should prevent it): run it like a dead end.
        self.view.last_placements.append(p.id)
        token.status = S.DONE
        self.view.tokens.pop(token.id, None)
        await self.commit(Commit(self.view.run.id, tokens=[token]), unless_ended=True)
        await self.joins.token_ended(token)
        return None

    async def node_step(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        impl: NodeImplementation,
        settings: NodeSettings,
    ) -> TokenRecord | None:
        signal = None
        if token.id in self.prestarted:
            # The commit that moved the token here also started this attempt.
            self.prestarted.discard(token.id)
        else:
            # A sync node starts once a thread is free for it: its window is its code's.
            if (
                self.attempts.needs_thread(impl)
                and await self.attempts.wait_for_thread(token.id, self.root) is not None
            ):
                return None  # (the run ended meanwhile)
            async with self.steps.hold():
                if self.view.end is not None or token.status is S.CANCELLED:
                    self.attempts.drop_thread(token.id)
                    return None
                fired = take_due(token)
                signal = signal_of(token)
                events = []
                if fired is Waiting.RETRY:
                    events.append(self.event(token, TimerFired(purpose="retry")))
                started, anchors, due = self.arming.start_attempt(token, p.id, impl.id, settings)
                events.append(started)
                if not await self.commit(
                    Commit(
                        self.view.run.id, tokens=[token], events=events, anchors=anchors, due=due
                    ),
                    unless_ended=True,
                ):
                    self.token_attempts.not_started(token.id)
                    return None
        base = dict(self.view.state)
        call = AttemptCall(
            impl=impl,
            settings=settings,
            placement=p.id,
            state=base,
            parent=self.root,
            key=token.id,
            attempt=token.attempt,
            visit=token.visit,
            deadline=token.deadline,
            signal=signal,
        )
        attempt = await self.token_attempts.invoke(call, token)
        return await self.after_attempt(token, p, impl.id, settings, base, attempt)

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
        async with self.steps.hold():
            if self.view.end is not None or token.status is S.CANCELLED:
                return None
            if attempt.kind == "cancelled":
                interrupt = take_interrupt(token)
                c = attempt.cancellation
                if interrupt is not None and c is not None and c.reason is CancelReason.TIMER:
                    self.view.last_placements = [p.id]
                    return (
                        await self.move(
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
                self.view.last_placements = [p.id]
                return (
                    await self.move(
                        Move(
                            token,
                            p,
                            output,
                            event=lambda to: NodeFinished(output=output, to=to),
                            update=lambda: self.token_attempts.state_update(base, attempt),
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
        budget = settings.timeout
        assert budget is not None
        timeout_err = NodeTimeoutError(node_id, p.id, budget)
        routed = TIMEOUT_OUTPUT in p.route_map()
        late = timed_out(budget, deadline, routed)
        rearmed = self.arming.fixed_window_end(p.id, settings, self.clock.now()) is None
        # (A window that does not rearm is over for every later attempt too.)
        if rearmed and self.retry_allowed(token, settings, timeout_err, explicit_only=True):
            await self.schedule_retry(token, settings, timeout_err, self.event(token, late))
            return None
        if routed:
            self.view.last_placements = [p.id]
            return (
                await self.move(
                    Move(
                        token,
                        p,
                        TIMEOUT_OUTPUT,
                        event=lambda to: timed_out(budget, deadline, routed, to),
                    )
                )
            ).next
        interrupted = InterruptedAt("timeout", p.id, deadline, (p.id,))
        await self._fail(token, self.event(token, late), timeout_err, interrupted)
        return None

    async def _failed(
        self, token: TokenRecord, p: AnyPlacement, settings: NodeSettings, attempt: Attempt
    ) -> TokenRecord | None:
        """The attempt raised: the ``error`` route for a broken output contract, a retry, or the
        run fails."""
        exc = attempt.error
        assert exc is not None
        if isinstance(exc, OutputContractError) and "error" in p.route_map():
            error = self.error_data(exc)
            self.view.last_placements = [p.id]
            return (
                await self.move(
                    Move(token, p, "error", event=lambda to: NodeFailed(error=error, to=to))
                )
            ).next
        ev = self.event(token, NodeFailed(error=self.error_data(exc)))
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
        token.status = S.FAILED
        failed = Commit(self.view.run.id, tokens=[token], events=[event], due_cleared=[token.id])
        if await self.commit(failed, unless_ended=True):
            self.fail_token(token, exc, interrupted)

    async def park(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        node_id: str,
        settings: NodeSettings,
        base: Mapping[str, Any],
        attempt: Attempt,
    ) -> TokenRecord | None:
        request = attempt.park
        assert request is not None
        now = self.clock.now()
        drop_signal(token)
        anchors, due = self.arming.arm(token, p.id, settings, now)
        if token.deadline is not None and token.deadline <= now:
            # (Its window is over before it could park: what the park's timeout would do.)
            return await self.window_ended(token, p, node_id, settings, token.deadline)
        token.status = S.PARKED
        token.epoch += 1
        park = ParkRecord(
            f"{token.id}#{token.epoch}",
            self.view.run.id,
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
            due.insert(0, TIMEOUT.entry(token.deadline, self.view.run.id, token.id))
        ev = self.event(
            token,
            Parked(
                key=request.key,
                deadline=isoformat(token.deadline) if token.deadline else None,
                park=park.id,
            ),
        )
        self.view.parks[token.id] = park
        ok = await self.commit(
            Commit(
                self.view.run.id,
                tokens=[token],
                events=[ev],
                due=due,
                anchors=anchors,
                parks=[park],
            ),
            unless_ended=True,
            update=lambda: self.token_attempts.state_update(base, attempt),
            token=token,
        )
        if not ok:
            self.view.parks.pop(token.id, None)
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
        policy = settings.retry
        assert policy is not None

        delay = backoff_delay(
            policy, token.attempt, previous=last_backoff(token), rng=self.host.random
        )
        now = self.clock.now()
        due = now + delay
        # A window anchored at the run's start or the first arrival does not wait for the next
        # attempt: it ends when it ends, also during the backoff.
        window_end = self.arming.fixed_window_end(token.placement, settings, now)
        failed_attempt = token.attempt
        token.attempt += 1
        token.status = S.WAITING
        token.due = due
        token.deadline = window_end
        wait_for(token, Waiting.RETRY, delay)
        dues = [RESUME.entry(due, self.view.run.id, token.id)]
        if window_end is not None and window_end < due:
            dues.insert(0, TIMEOUT.entry(window_end, self.view.run.id, token.id))
        retried = self.event(
            token,
            NodeRetried(
                due=isoformat(due),
                next_attempt=token.attempt,
                delay=delay.total_seconds(),
                error=type(exc).__name__,
            ),
            attempt=failed_attempt,
        )
        if await self.commit(
            Commit(
                self.view.run.id,
                tokens=[token],
                events=[ev, retried],
                due=dues,
            ),
            unless_ended=True,
        ):
            self.host.wake_sweeper(dues[0].when)

    async def at_wait(self, token: TokenRecord, p: Wait) -> TokenRecord | None:
        if is_due(token, Waiting.WAIT):
            self.view.last_placements = [p.id]
            return (
                await self.move(
                    Move(
                        token,
                        p,
                        "elapsed",
                        event=lambda to: TimerFired(purpose="wait", output="elapsed", to=to),
                    )
                )
            ).next
        now = self.clock.now()
        due = p.until if p.until is not None else now + (p.duration or (now - now))
        token.status = S.WAITING
        token.due = due
        wait_for(token, Waiting.WAIT)
        if await self.commit(
            Commit(
                self.view.run.id,
                tokens=[token],
                events=[self.event(token, WaitStarted(due=isoformat(due)))],
                due=[RESUME.entry(due, self.view.run.id, token.id)],
            ),
            unless_ended=True,
        ):
            self.host.wake_sweeper(due)
        return None

    async def at_terminal(self, token: TokenRecord, p: Terminal) -> TokenRecord | None:
        token.status = S.DONE
        self.view.tokens.pop(token.id, None)
        ev = self.event(token, TerminalReached(outcome=p.outcome))
        if not await self.commit(
            Commit(self.view.run.id, tokens=[token], events=[ev]), unless_ended=True
        ):
            return None
        self.view.terminals.append(p.id)
        if p.fails:
            self.request_end(Lifecycle.FAILED, [self.error_info(FailedTerminalError(p.id))])
        elif self.view.outcome is None and sets_outcome(token):
            self.view.outcome = p.outcome
        await self.joins.token_ended(token)
        return None
