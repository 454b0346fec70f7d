"""Node attempts of a run's tokens: the run's :class:`~flowtide.engine.run.attempts.AttemptRunner`
runs the code; this part tells it what a token's attempt needs (a timer that fired before its
start, the pid of its node's process recorded in the history) and merges what it changed.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from functools import partial
from typing import Any, Protocol

from flowtide.engine.event_types import ProcessStarted
from flowtide.engine.run.attempts import Attempt, AttemptCall, AttemptRunner, StartHooks
from flowtide.engine.run.executor.ports import StepPort
from flowtide.engine.run.marks import interrupted
from flowtide.engine.state.reducers import StateMerger
from flowtide.store.base import Commit, TokenRecord


class AttemptHost(StepPort, Protocol):
    """What token attempts need of the executor besides a step: its attempt runner, state
    merger and starting tokens, and a side task (a process's pid recorded meanwhile)."""

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def merger(self) -> StateMerger: ...

    @property
    def starting(self) -> set[str]: ...

    def spawn_aux(self, coro: Coroutine[Any, Any, Any]) -> None: ...


class TokenAttempts:
    """Node attempts of the run's tokens (and phases, scatter items), through ``ex``."""

    def __init__(self, ex: AttemptHost) -> None:
        self.ex = ex

    def invoke(
        self, call: AttemptCall, token: TokenRecord | None = None
    ) -> Coroutine[Any, Any, Attempt]:
        """Run the node's code once (see :meth:`AttemptRunner.invoke
        <flowtide.engine.run.attempts.AttemptRunner.invoke>`), for ``token`` if given: only a
        token's node may park. (The runner's coroutine itself: no frame more per attempt.)"""
        if token is None:
            return self.ex.attempts.invoke(call)
        hooks = StartHooks(
            partial(self.interrupted_before_start, token),
            partial(self.process_started, token),
            parkable=True,
        )
        return self.ex.attempts.invoke(call, hooks)

    def process_started(self, token: TokenRecord, placement: str, pid: int) -> None:
        """A node's process has started: its pid is recorded in the run's history (in the
        background, the attempt does not wait on the store)."""
        event = self.ex.event(token, ProcessStarted(pid=pid), placement=placement)
        self.ex.spawn_aux(self.ex.commit(Commit(self.ex.view.run.id, events=[event])))

    def interrupted_before_start(self, token: TokenRecord) -> bool:
        """The attempt's scope is about to be registered: True if an interrupting timer fired
        since its start was committed (the attempt is cancelled at once, reason ``timer``)."""
        self.ex.starting.discard(token.id)
        return interrupted(token)

    def not_started(self, token_id: str) -> None:
        """The attempt start of ``token_id`` was not committed: it is not starting, and gives
        back the thread slot it took."""
        self.ex.starting.discard(token_id)
        self.ex.attempts.drop_thread(token_id)

    def state_update(
        self, base: Mapping[str, Any], attempt: Attempt
    ) -> tuple[dict[str, Any], list[str]]:
        """Merge a finished attempt's changes into the run state (returns what to commit)."""
        assert attempt.changes is not None  # (found when the attempt ended, from ``base``)
        changed, deleted = attempt.changes
        if not changed and not deleted and not attempt.update:
            return {}, []
        return self.ex.merger.apply(self.ex.view.state, base, changed, deleted, attempt.update)
