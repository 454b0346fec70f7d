"""The park-at-once fast path of :meth:`Engine.run <flowtide.engine.engine.Engine.run>`.

A run whose entrypoint is a :class:`~flowtide.engine.plan.FastEntry` (no pre phase, a task
whose node runs on the loop, no timers, no node anchor), started by ``Engine.run`` with no hook
registered, starts without an executor:

1. one commit creates the run with what the general path stores once its first attempt has
   started: the run ``running`` with its ``run_started`` event, the first token ``running``
   (window resolved) and its ``node_started`` event. A crash from here on leaves a run that
   :meth:`Engine.resume` re-runs (at-least-once), as on the general path;
2. the node's code runs eagerly in the caller's task: an async node is stepped once, an inline
   sync node is called;
3. if it parked, one commit stores what the general path stores for the park and then when it
   lets go of the run: the token ``parked`` (window re-armed) with its park record, its
   ``parked`` event, the state change, the due entries (the park deadline, the run deadline),
   the lifecycle ``parked`` and the resume checkpoint. ``run()`` returns the result the general
   path returns at that point; nothing of the run stays in memory.

Anything else (an output, an exception, a first step that suspends, a park whose window or run
deadline is already over) is handed to a :class:`~flowtide.engine.run.RunExecutor` set up as the
general path is at that point (the run started, the attempt running in its own scope, a child of
the run's root scope), whose task finishes the attempt as :meth:`RunExecutor.invoke` does
(a suspended coroutine is continued by that task, the scope bound to it, its window armed) and
goes on as :meth:`RunExecutor._drive` does. The history, the state and the store contents are
those of the general path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from datetime import datetime
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from flowtide.clock import isoformat
from flowtide.engine.context import NodeContext
from flowtide.engine.eager import Remainder
from flowtide.engine.errors import Cancelled, UndeclaredOutputError
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.output import Park
from flowtide.engine.plan import FastEntry, FlowPlan
from flowtide.engine.reducers import copy_state
from flowtide.engine.result import ErrorInfo, RunResult, parked_result
from flowtide.engine.run import Attempt, RunExecutor
from flowtide.engine.scope import CancelScope, ScopeDeadline
from flowtide.model.settings import TimeoutAnchor
from flowtide.store.base import (
    Checkpoint,
    Commit,
    DueEntry,
    EventRecord,
    ParkRecord,
    RunRecord,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

if TYPE_CHECKING:
    from flowtide.engine.engine import Engine

__all__ = ["park_at_once"]

_RUNNING = Lifecycle.RUNNING.value
_PARKED = Lifecycle.PARKED.value


async def park_at_once(
    engine: Engine, plan: FlowPlan, fast: FastEntry, run: RunRecord, state: dict[str, Any]
) -> RunResult | asyncio.Future[RunResult] | None:
    """Start ``run`` (not stored yet, lifecycle ``pending``) at ``fast``.

    Returns the parked run's result; or the future of its first quiescent point once it was
    handed to an executor; or None when the fast path does not apply (nothing was stored: start
    it on the general path).
    """
    clock = engine.clock
    now = clock.now()
    settings = fast.settings
    p = fast.placement
    pid = p.id
    run_id = run.id
    deadline = None
    window: dict[str, Any] | None = None
    if settings.timeout is not None:
        deadline, window = _window(fast, now, run.created_at)
        if deadline <= now:
            return None  # it times out at once: the general path says so
    if run.deadline is not None and run.deadline <= now:
        return None
    # -- the start: what RunExecutor.main commits before the first attempt runs --
    run.lifecycle = _RUNNING
    run.started_at = now
    token = TokenRecord(
        f"{run_id}.1",
        run_id,
        pid,
        TokenStatus.RUNNING,
        1,
        1,
        (),
        deadline,
        None,
        now,
        {"window": window} if window is not None else {},
    )
    flow = plan.flow
    impl = fast.impl
    events = [
        EventRecord(
            "run_started",
            run_id,
            now,
            None,
            None,
            None,
            {
                "flow": flow.id,
                "version": flow.version,
                "deadline": isoformat(run.deadline) if run.deadline else None,
            },
        ),
        EventRecord(
            "node_started",
            run_id,
            now,
            pid,
            1,
            token.id,
            {"visit": 1, "node": impl.id, "deadline": window["deadline"] if window else None},
        ),
    ]
    # (Commit by position: run id, run, tokens, state, state deleted, events.)
    stored = await engine.store.create_run(
        run, state, Commit(run_id, None, [token], None, (), events)
    )
    # A run's events are numbered 1, 2, 3, ...: the last of a new run's is their count (no
    # record built to read it).
    seq = len(stored)
    # -- the attempt (RunExecutor.invoke), its first step in this task --
    base = dict(state)
    scope = CancelScope(None, pid)
    ctx_state = copy_state(base)
    ctx = NodeContext(ctx_state, run_id, pid, 1, 1, None, clock, scope)
    # On a clock that runs ties in arming order, armed before the code runs, as on the general
    # path: at the same instant as a timer the node arms, the deadline (armed first) wins.
    # Elsewhere it is armed only if the attempt goes on after its first step (_hand_over).
    timer = ScopeDeadline(clock, scope, deadline) if clock.ties_in_order else None
    value: Any = None
    rest: Awaitable[Any] | None = None
    # While the node's first step runs, a cancel of this run (by the node itself) finds it here
    # and gets the executor the general path would have by now.
    eager = EagerRun(engine, plan, run, state, token, scope, seq)
    engine._eager[run_id] = eager
    try:
        if impl.is_async:
            coro = impl.fn(ctx)
            if type(coro) is CoroutineType:
                try:
                    first = coro.send(None)
                except StopIteration as stop:
                    value = stop.value
                else:
                    rest = Remainder(coro, first)  # it suspended: a task continues it
            else:
                rest = coro
        else:
            value = impl.fn(ctx)
    except Exception as exc:
        rest = _Done(None, exc)
    except Cancelled:
        value = None
    except BaseException as exc:
        # Not the node's outcome (a cancel of the caller, an interrupt): the executor's task
        # raises it where the general path would.
        rest = _Done(None, exc)
    finally:
        del engine._eager[run_id]
    if rest is None and eager.ex is None:
        try:
            _, update, request = RunExecutor._interpret(impl, pid, value, ctx_state)
        except UndeclaredOutputError:
            request = None
        if request is not None:
            if timer is not None:
                timer.disarm()
            parked = _park(
                engine, fast, run, state, base, ctx_state, update, token, request, seq, now, window
            )
            if parked is not None:
                # (Committed here: a plain function builds the commit, no coroutine of its own.)
                c, deadline, at = parked
                await engine.store.commit(c)
                if deadline is not None:
                    engine.sweeper.wake(
                        deadline
                        if run.deadline is None or deadline <= run.deadline
                        else run.deadline
                    )
                elif run.deadline is not None:
                    engine.sweeper.wake(run.deadline)
                return parked_result(
                    run_id, dict(state), token.id, pid, request.key, deadline, request.payload, at
                )
    if rest is None:
        rest = _Done(value, None)
    return _hand_over(eager, fast, base, ctx_state, timer, rest)


def _park(
    engine: Engine,
    fast: FastEntry,
    run: RunRecord,
    state: dict[str, Any],
    base: dict[str, Any],
    ctx_state: dict[str, Any],
    update: Any,
    token: TokenRecord,
    request: Park,
    seq: int,
    started: datetime,
    start_window: dict[str, Any] | None,
) -> tuple[Commit, datetime | None, datetime] | None:
    """What RunExecutor._park and RunExecutor._settle commit, as one commit, with the park's
    deadline and instant; None (nothing done) when the park times out at once or the run
    deadline has passed."""
    now = engine.clock.now()
    settings = fast.settings
    deadline = None
    window: dict[str, Any] | None = None
    if settings.timeout is not None:
        if now == started and start_window is not None:
            # Re-armed at the start's instant: the same window (the token holds it already).
            deadline = token.deadline
            window = start_window
        else:
            deadline, window = _window(fast, now, run.created_at)
        assert deadline is not None
        if deadline <= now:
            return None
    if run.deadline is not None and run.deadline <= now:
        return None
    run_id = run.id
    pid = token.placement
    if window is not start_window:
        token.deadline = deadline
        if window is not None:
            token.data["window"] = window
    token.status = TokenStatus.PARKED
    token.epoch += 1
    park = ParkRecord(
        f"{token.id}#{token.epoch}",
        run_id,
        token.id,
        pid,
        1,
        token.epoch,
        now,
        deadline,
        request.key,
        request.payload,
    )
    due: list[DueEntry] = []
    if deadline is not None:
        due.append(_due(deadline, run_id, token.id, "timeout"))
    if run.deadline is not None:
        # The run is let go: the sweeper holds its deadline.
        due.append(DueEntry(run.deadline, run_id, run_id, "deadline"))
    ev = EventRecord(
        "parked",
        run_id,
        now,
        pid,
        1,
        token.id,
        {"key": request.key, "deadline": window["deadline"] if window else None, "park": park.id},
    )
    # (By position, as every park makes one: run id, run, tokens, state, state deleted, events,
    # due, due cleared, due dropped, anchors, anchors released, scatter, parks.)
    c = Commit(run_id, run, [token], None, (), [ev], due, (), (), (), (), (), [park])
    merger = fast.merger
    changed, deleted = merger.changes(base, ctx_state)
    if changed or deleted or update:
        written, removed = merger.apply(state, base, changed, deleted, update)
        if written:
            c.state = written
        if removed:
            c.state_deleted = removed
    run.lifecycle = _PARKED
    # Current to the ``parked`` event: a run's events are numbered 1, 2, 3, ... in its history.
    run.checkpoint = Checkpoint(seq + 1, {pid: 1}, [], None)
    return c, deadline, now


class EagerRun:
    """A run whose first attempt runs eagerly in ``Engine.run``, and its executor once one is
    needed: when the attempt is handed over, or when the run is cancelled meanwhile."""

    __slots__ = ("engine", "ex", "plan", "run", "scope", "seq", "state", "token")

    def __init__(
        self,
        engine: Engine,
        plan: FlowPlan,
        run: RunRecord,
        state: dict[str, Any],
        token: TokenRecord,
        scope: CancelScope,
        seq: int,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.run = run
        self.state = state
        self.token = token
        self.scope = scope
        self.seq = seq
        self.ex: RunExecutor | None = None

    def executor(self) -> RunExecutor:
        """The executor as RunExecutor.main leaves it while the first attempt runs."""
        ex = self.ex
        if ex is not None:
            return ex
        token = self.token
        scope = self.scope
        ex = self.ex = RunExecutor(self.engine, self.plan, self.run, self.state)
        ex._started = True
        ex.tokens[token.id] = token
        ex._visits[token.placement] = 1
        next(ex._ids)  # the token took the run's first id
        ex._seq = self.seq
        # The attempt's scope is a child of the run's root scope, as if opened there.
        scope._parent = ex.root
        ex.root._children = {scope}
        ex._running[token.id] = (token.placement, scope)
        self.engine._runs[self.run.id] = ex
        ex._arm_deadline()
        return ex


def _hand_over(
    eager: EagerRun,
    fast: FastEntry,
    base: dict[str, Any],
    ctx_state: dict[str, Any],
    timer: ScopeDeadline | None,
    rest: Awaitable[Any],
) -> asyncio.Future[RunResult]:
    """The executor, and a task that finishes the attempt and drives the token on. Returns
    the future ``run()`` awaits."""
    # Cancelled during the first step (by the node itself): as on the general path, where the
    # node's own task cannot be cancelled under it, the code goes on to its end.
    scope = eager.scope
    during_step = scope.cancellation is not None
    ex = eager.executor()
    engine = eager.engine
    token = eager.token
    if timer is None:
        timer = ScopeDeadline(engine.clock, scope, token.deadline)
    settled = engine._settle_future(ex.run.id)
    task = asyncio.get_running_loop().create_task(
        _continue(ex, fast, token, scope, timer, base, ctx_state, rest, during_step)
    )
    ex._tasks.add(task)
    return settled


async def _continue(
    ex: RunExecutor,
    fast: FastEntry,
    token: TokenRecord,
    scope: CancelScope,
    timer: ScopeDeadline,
    base: dict[str, Any],
    ctx_state: dict[str, Any],
    rest: Awaitable[Any],
    during_step: bool,
) -> None:
    """The rest of RunExecutor.invoke for the handed-over attempt, then _after_attempt and
    _drive, in the run's task (as RunExecutor.main runs its first token)."""
    task = asyncio.current_task()
    assert task is not None
    p = fast.placement
    try:
        attempt = await _finish(ex, fast, token, scope, timer, ctx_state, rest, task, during_step)
        # eager: this task drives the token, as a placement handler does (a split's branches
        # start in it).
        nxt = await ex._after_attempt(
            token, p, fast.impl.id, fast.settings, base, attempt, eager=True
        )
        if nxt is not None:
            await ex._drive(nxt)
    except asyncio.CancelledError:
        if not ex._closed:
            raise
    except StoreConflict:
        ex.engine._discard(ex)
    except Exception as exc:
        ex._request_end(Lifecycle.FAILED, [ErrorInfo.of(exc, p.id)])
    finally:
        ex._tasks.discard(task)
        ex._maybe_drained()


async def _finish(
    ex: RunExecutor,
    fast: FastEntry,
    token: TokenRecord,
    scope: CancelScope,
    window: ScopeDeadline,
    ctx_state: dict[str, Any],
    rest: Awaitable[Any],
    task: asyncio.Task[Any],
    during_step: bool,
) -> Attempt:
    pid = fast.placement.id
    deadline = token.deadline
    value: Any = None
    error: BaseException | None = None
    try:
        with scope.bind():
            if scope.cancellation is not None and not during_step and isinstance(rest, Remainder):
                # Cancelled before this task held the scope: what CancelScope._propagate does
                # to the task that runs the attempt.
                scope._cancelled_by_us = True
                task.cancel(msg=f"flowtide: {scope.cancellation.reason.value}")
            try:
                value = await rest
            except Exception as exc:
                error = exc
            except Cancelled:
                pass
    finally:
        window.disarm()
        scope.close()
        ex._running.pop(token.id, None)
    return ex._attempt_end(fast.impl, pid, scope, window, deadline, value, error, ctx_state, True)


def _window(
    fast: FastEntry, now: datetime, created_at: datetime
) -> tuple[datetime, dict[str, Any]]:
    """The deadline and ``resolve_window(settings, now=now, run_created_at=created_at)
    .to_data()`` of a fast entry's window (a timeout, no node anchor), without the Window,
    formatting ``now`` once when it is also the anchor instant (anchor ``park``)."""
    timeout = fast.settings.timeout
    assert timeout is not None
    resolved = isoformat(now)
    if fast.from_instance:
        deadline = created_at + timeout
        anchor = _INSTANCE
        at = isoformat(created_at)
    else:  # park (a node anchor, which a fast entry has not, would be now too)
        deadline = now + timeout
        anchor = _PARK
        at = resolved
    return deadline, {
        "anchor": anchor,
        "anchor_at": at,
        "timeout": fast.timeout_s,
        "deadline": isoformat(deadline),
        "resolved_at": resolved,
    }


_INSTANCE = TimeoutAnchor.INSTANCE.value
_PARK = TimeoutAnchor.PARK.value


_new = object.__new__
# The slots' setters: the frozen dataclass's __init__ sets each field by name through
# object.__setattr__, which is slower than the slot descriptor itself.
_due_when, _due_run, _due_token, _due_purpose = (
    DueEntry.__dict__[name].__set__ for name in ("when", "run_id", "token_id", "purpose")
)


def _due(when: datetime, run_id: str, token_id: str, purpose: str) -> DueEntry:
    """``DueEntry(when, run_id, token_id, purpose)`` (a park's deadline), built without the
    dataclass's __init__."""
    entry = _new(DueEntry)
    _due_when(entry, when)
    _due_run(entry, run_id)
    _due_token(entry, token_id)
    _due_purpose(entry, purpose)
    return entry


class _Done:
    """An attempt's code that already finished: its value, or its exception raised again."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any, error: BaseException | None) -> None:
        self._value = value
        self._error = error

    def __await__(self) -> Generator[Any, Any, Any]:
        if self._error is not None:
            raise self._error
        return self._value
        yield  # a generator that never yields
