"""Running a node's code once: its own cancel scope, its window, where it runs (the loop, a worker
thread, a process), and what it returned. The runner knows no tokens: what a run's executor
needs of an attempt's start (a timer that fired before it, the pid of a node's process) it
hands in as callbacks.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple

from flowtide.authoring.nodes import NodeImplementation
from flowtide.engine.context import NodeContext
from flowtide.engine.errors import (
    Cancelled,
    EngineError,
    UndeclaredOutputError,
)
from flowtide.engine.output import Output, Park
from flowtide.engine.state.limits import (
    InvalidKeyError,
    ValueTooLargeError,
    check_key,
    check_keys,
    check_size,
    checked,
)
from flowtide.engine.state.nodestate import NodeState
from flowtide.engine.state.reducers import StateMerger
from flowtide.engine.timing.deadlines import (
    attempt_deadline,
)
from flowtide.engine.timing.scope import Cancellation, CancelReason, CancelScope, ScopeDeadline
from flowtide.engine.worker import handoff
from flowtide.engine.worker._host import RunHost
from flowtide.engine.worker.instruments import seconds, timed
from flowtide.engine.worker.process import run_in_process
from flowtide.model.flow import Flow
from flowtide.model.placements import (
    PARKED_OUTPUT,
)
from flowtide.model.settings import NodeSettings
from flowtide.store.base import RunRecord
from flowtide.store.jsonvalues import NotJSONError

COMPUTE: Any = object()
"""A deadline not resolved by the caller: the attempt resolves it."""
Running = dict[str, tuple[str, CancelScope]]
"""The cancel scopes of a run's attempts (and child runs, scatters) at work: key -> (placement,
scope)."""


@dataclass(slots=True)
class Attempt:
    """How one run of a node's code ended."""

    kind: Literal["ok", "error", "timeout", "cancelled", "park"]
    output: str | None = None
    park: Park | None = None
    state: dict[str, Any] | None = None
    update: Mapping[str, Any] = field(default_factory=dict)
    changes: tuple[dict[str, Any], list[str]] | None = None
    """The top-level keys the node changed and deleted in its copy of the state (when it
    returned an output or parked)."""
    error: BaseException | None = None
    cancellation: Cancellation | None = None
    deadline: datetime | None = None


class StartHooks(NamedTuple):
    """What the caller of an attempt hears of its start. (A tuple: one is made per attempt.)"""

    interrupted: Callable[[], bool] | None = None
    """Asked as the attempt's scope is about to be registered: True if it is cancelled at once
    (an interrupting timer fired since its start was committed: reason ``timer``)."""
    process_started: Callable[[str, int], None] | None = None
    """A node's process has started: its placement and pid."""
    parkable: bool = False
    """Whether the node may park here (a task's token may; a phase or a scatter's item not)."""


NO_HOOKS = StartHooks()


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptCall:
    """One attempt of a node's code, as its caller describes it (one is made per attempt)."""

    impl: NodeImplementation
    settings: NodeSettings
    placement: str
    state: Mapping[str, Any]
    """The run state the node starts from: nobody changes it while the node runs (the node's
    own copy is made as it reads: :class:`~flowtide.engine.state.nodestate.NodeState`)."""
    parent: CancelScope
    """The scope the attempt's own scope is a child of."""
    key: str
    """What the attempt's scope (and its thread slot) is known by among the run's."""
    attempt: int
    visit: int
    item: Any = None
    """The scatter item, for ``ctx.item`` (None: the run's own, if it is a scatter's child)."""
    deadline: datetime | None = COMPUTE
    """The attempt's window end, when the caller has already resolved (and stored) it; computed
    when the attempt starts otherwise."""
    signal: Any = None


class AttemptRunner:
    """Runs one run's node attempts; its thread slots."""

    __slots__ = ("clock", "flow", "host", "item", "merger", "run", "running", "thread_held")

    def __init__(
        self, host: RunHost, run: RunRecord, flow: Flow, merger: StateMerger, running: Running
    ) -> None:
        self.host = host
        self.clock = host.clock
        self.run = run
        self.flow = flow
        self.merger = merger
        self.running = running
        self.item: Any = run.options.get("item")
        """The scatter item the (child) run works on, passed to its nodes as ``ctx.item``."""
        self.thread_held: set[str] = set()
        """Attempt keys holding a thread slot whose code was not sent to a thread yet."""

    async def invoke(self, call: AttemptCall, hooks: StartHooks = NO_HOOKS) -> Attempt:
        """Run the node's code once in its own child scope, bounded by its window; ``hooks``:
        what the caller hears of its start.

        A thread-executed node first takes a thread slot (unless it took one before its start
        was committed: see :meth:`take_thread_now`), so that its window is not spent waiting for
        a thread.
        """
        if call.key not in self.thread_held and self.needs_thread(call.impl):
            stopped = await self.wait_for_thread(call.key, call.parent)
            if stopped is not None:
                return Attempt("cancelled", cancellation=stopped)
        # (One coroutine per attempt: its whole run is here, between taking its thread slot and
        # giving it back if its code never went to a thread.)
        try:
            clock = self.clock
            now = clock.now()
            placement = call.placement
            if hooks.interrupted is not None and hooks.interrupted():
                cancelled = Cancellation(CancelReason.TIMER, now, placement)
                return Attempt("cancelled", cancellation=cancelled)
            deadline = call.deadline
            if deadline is COMPUTE:
                deadline = attempt_deadline(
                    call.settings, now=now, run_created_at=self.run.created_at
                )
            if deadline is not None and deadline <= now:
                return Attempt("timeout", deadline=deadline)
            scope = CancelScope(call.parent, placement)
            if scope.cancellation is not None:
                scope.close()
                return Attempt("cancelled", cancellation=scope.cancellation)
            window = ScopeDeadline(clock, scope, deadline)
            ctx = NodeContext(
                state=NodeState(call.state),
                run_id=self.run.id,
                placement=placement,
                attempt=call.attempt,
                visit=call.visit,
                item=call.item if call.item is not None else self.item,
                clock=clock,
                scope=scope,
                signal=call.signal,
            )
            value: Any = None
            final_state: dict[str, Any] = ctx.state
            error: BaseException | None = None
            key = call.key
            self.running[key] = (placement, scope)
            try:
                with scope.bind():
                    try:
                        value, final_state = await self._run_code(call, ctx, scope, hooks)
                    except Exception as exc:
                        error = exc
                    except Cancelled:
                        pass
            finally:
                window.disarm()
                scope.close()
                self.running.pop(key, None)
            ended = self.attempt_end(
                call, scope, window, deadline, value, error, final_state, hooks.parkable
            )
            instruments = self.host.instruments
            if timed(instruments):
                instruments.attempt(ended.kind, seconds(now, self.clock.now()))
            return ended
        finally:
            self.drop_thread(call.key)  # (its code never went to a thread: the slot goes back)

    async def _run_code(
        self, call: AttemptCall, ctx: NodeContext, scope: CancelScope, hooks: StartHooks
    ) -> tuple[Any, dict[str, Any]]:
        """Where the node's code runs depends on how it is declared (on the loop, in a worker
        thread, in a process): returns its value and its final state (the context's state as
        given to the node, but for a process, which works on a copy)."""
        impl = call.impl
        state = ctx.state
        if impl.is_async:
            return await impl.fn(ctx), state
        if impl.execution == "inline":
            return impl.fn(ctx), state
        clock = self.clock
        if impl.execution == "thread":
            with clock.hold():  # the clock cannot see a thread's work
                return await self.in_thread(impl.fn, ctx, call.key), state
        told = hooks.process_started
        started = functools.partial(told, call.placement) if told is not None else _unheard
        return await run_in_process(impl, ctx, scope, clock, started)

    async def in_thread(self, fn: Callable[[NodeContext], Any], ctx: NodeContext, key: str) -> Any:
        """``fn(ctx)`` in one of the engine's worker threads, in a copy of this context (as
        ``asyncio.to_thread``), under the thread slot attempt ``key`` holds: the slot goes back
        when the code returns, even if the attempt has ended before (a timeout)."""
        call = functools.partial(contextvars.copy_context().run, fn, ctx)
        returned = None
        if key in self.thread_held:
            self.thread_held.discard(key)  # (from now on, the thread gives it back)
            returned = self.host.thread_slots.give
        return await handoff.in_thread(self.host.threads, call, returned)

    def needs_thread(self, impl: NodeImplementation) -> bool:
        """Whether ``impl``'s attempts run in a worker thread (and take a thread slot)."""
        return not impl.is_async and impl.execution == "thread" and self.host.executes

    def take_thread_now(self, key: str, impl: NodeImplementation) -> bool:
        """Before attempt ``key``'s start is committed (with a move): False if it needs a thread
        slot and none is free now (the attempt then starts once one is, by itself)."""
        if not self.needs_thread(impl) or key in self.thread_held:
            return True
        if self.host.thread_slots.try_take():
            self.thread_held.add(key)
            return True
        return False

    async def wait_for_thread(self, key: str, parent: CancelScope) -> Cancellation | None:
        """Take a thread slot for attempt ``key``, waiting in turn (None), unless ``parent`` is
        cancelled first (the run ended, the scatter stopped): then its cancellation."""
        if key in self.thread_held:
            return None
        scope = CancelScope(parent)
        try:
            if scope.cancellation is None:
                with scope.bind():
                    await self.host.thread_slots.take()
                    self.thread_held.add(key)
        finally:
            scope.close()
        return None if key in self.thread_held else scope.cancellation

    def drop_thread(self, key: str) -> None:
        """Give back the thread slot attempt ``key`` took, if its code did not go to a thread."""
        if key in self.thread_held:
            self.thread_held.discard(key)
            self.host.thread_slots.give()

    def attempt_end(
        self,
        call: AttemptCall,
        scope: CancelScope,
        window: ScopeDeadline,
        deadline: datetime | None,
        value: Any,
        error: BaseException | None,
        state: dict[str, Any],
        parkable: bool,
    ) -> Attempt:
        """How an attempt whose scope is closed ended: its cancellation (a timeout when its
        window fired), its error, or what its value asks for; ``state``: the node's final state,
        ``deadline``: its window end as resolved, ``parkable``: a park request is allowed here."""
        impl, placement = call.impl, call.placement
        if scope.cancellation is not None:
            if window.fired:
                return Attempt("timeout", deadline=deadline, cancellation=scope.cancellation)
            return Attempt("cancelled", cancellation=scope.cancellation)
        if error is not None:
            return Attempt("error", error=error, deadline=deadline)
        try:
            name, update, park = self.interpret(impl, placement, value, state)
            # What a step commits is JSON on every store: refused here, at the node that made it
            # (what it left as it was came from the store: JSON already).
            limit = self.host.max_value_bytes
            # (JSON, and within the size limit: checked in one pass, each value encoded once)
            changes = self.merger.changes(call.state, state, limit)
            changed = changes[0]
            if update:
                update = checked(update, "update", limit)
            if park is not None:
                check_size(park.payload, "park payload", limit)
            # (Keys a store indexes: checked here, the same on every store.)
            check_keys(changed, "state")
            if update:
                check_keys(update, "update")
            if park is not None and park.key is not None:
                check_key(park.key, "park key")
        except (UndeclaredOutputError, NotJSONError, ValueTooLargeError, InvalidKeyError) as exc:
            return Attempt("error", error=exc)
        contracts = self.host.output_contracts
        if park is None and contracts is not None:
            broken = contracts.check(self.flow, impl, placement, name, {**state, **update})
            if broken is not None:
                return Attempt("error", error=broken)
        if park is not None:
            if not parkable:
                err = EngineError(f"node {impl.id!r} at {placement!r} parked where it cannot")
                return Attempt("error", error=err)
            return Attempt(
                "park", state=state, update=update, park=park, deadline=deadline, changes=changes
            )
        return Attempt(
            "ok", output=name, state=state, update=update, deadline=deadline, changes=changes
        )

    @staticmethod
    def interpret(
        impl: NodeImplementation, placement: str, value: Any, state: Mapping[str, Any]
    ) -> tuple[str, Mapping[str, Any], Park | None]:
        update: Mapping[str, Any] = {}
        if isinstance(value, Park):
            return PARKED_OUTPUT, update, value
        if isinstance(value, Output):
            name: Any = value.name
            update = value.update
        elif value is None and len(impl.outputs) == 1:
            name = impl.outputs[0]
        else:
            name = value
        if name == PARKED_OUTPUT:
            key = update.get("correlation_key", state.get("correlation_key"))
            return name, update, Park(key=str(key) if key is not None else None)
        if not isinstance(name, str) or name not in impl.outputs:
            raise UndeclaredOutputError(impl.id, placement, name, impl.outputs)
        return name, update, None


def _unheard(pid: int) -> None:
    """Nobody listens for the start of the node's process."""
