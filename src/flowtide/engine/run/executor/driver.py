"""The driver: each token's task, placement after placement, handing each kind of placement to
the part that does it (a scatter's own step here). A part the executor holds (:class:`Driver`),
calling back only through :class:`DriveHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from flowtide.engine.errors import unavailable
from flowtide.engine.event_types import NodeStarted
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.run.attempts import AttemptRunner
from flowtide.engine.run.executor.child_runs import ChildRuns
from flowtide.engine.run.executor.joins import Joins
from flowtide.engine.run.executor.ports import DrainPort, EndPort, MovePort
from flowtide.engine.run.executor.steps import StepLock
from flowtide.engine.run.executor.tasks import TaskSteps
from flowtide.engine.run.move import Move
from flowtide.engine.run.scatter import ScatterHost, ScatterRun
from flowtide.engine.state.reducers import StateMerger
from flowtide.model.placements import Scatter
from flowtide.store.base import Commit, StoreConflict, TokenRecord, TokenStatus

S = TokenStatus

YIELD_EVERY = 16
"""A token's task gives the event loop a turn after this many steps in a row."""


class DriveHost(ScatterHost, MovePort, EndPort, Protocol):
    """What driving tokens needs of the executor besides a scatter's: the parts each kind of
    placement is handed to, the step lock, the state merger, the attempt runner (a thread slot
    given back), the run's tasks and settler, and whether it is closed."""

    @property
    def task_steps(self) -> TaskSteps: ...

    @property
    def joins(self) -> Joins: ...

    @property
    def children(self) -> ChildRuns: ...

    @property
    def steps(self) -> StepLock: ...

    @property
    def merger(self) -> StateMerger: ...

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def tasks(self) -> set[asyncio.Future[Any]]: ...

    @property
    def settler(self) -> DrainPort: ...

    @property
    def closed(self) -> bool: ...

    def working(self) -> bool: ...


class Driver:
    """Drives the run's tokens, through ``ex``."""

    def __init__(self, ex: DriveHost) -> None:
        self.ex = ex

    async def drive(
        self, token: TokenRecord | None, after: asyncio.Future[None] | None = None
    ) -> None:
        """Drive ``token`` placement after placement (once ``after`` is done, if given: the
        commit that moved it is stored)."""
        ex = self.ex
        placements = ex.plan.placements
        steps = 0
        own = token.id if token is not None else None
        try:
            if after is not None:
                await asyncio.shield(after)
            while token is not None:
                if ex.view.end is not None or token.status is S.CANCELLED:
                    return
                steps += 1
                if steps % YIELD_EVERY == 0:
                    # A node that never awaits (a hot loop back to itself), on a store that
                    # answers at once, must not starve the run's deadline, other runs or the
                    # sweeper.
                    await asyncio.sleep(0)
                p = placements[token.placement]
                if p.kind in _RUNS_CODE:
                    token = await _HANDLERS[p.kind](self, token, p)
                else:
                    async with ex.steps.hold():  # the whole placement is one step
                        if ex.view.end is not None or token.status is S.CANCELLED:
                            return  # (decided by the step that held the lock before)
                        token = await _HANDLERS[p.kind](self, token, p)
        except asyncio.CancelledError:
            if not ex.closed:
                raise
        except StoreConflict as exc:
            ex.lose_view(exc)
        except Exception as exc:
            if (down := unavailable(ex.view.run.id, exc)) is not None:
                ex.lose_view(down)  # (never the run's failure: it is resumed)
            else:
                placement = token.placement if token is not None else None
                ex.request_end(Lifecycle.FAILED, [ex.error_info(exc, placement)])
        finally:
            if own is not None:
                ex.attempts.drop_thread(own)  # (a slot taken for an attempt that never ran)
            ex.tasks.discard(asyncio.current_task())
            if not ex.working():  # else maybe_drained has nothing to do
                ex.settler.maybe_drained()

    async def at_scatter(self, token: TokenRecord, p: Scatter) -> TokenRecord | None:
        ex = self.ex
        body = ex.plan.nodes.get(p.id)
        async with ex.steps.hold():
            if ex.view.end is not None or token.status is S.CANCELLED:
                return None
            token.status = S.RUNNING
            started = ex.event(
                token,
                NodeStarted(
                    visit=token.visit, kind="scatter", deadline=None, node=body, subflow=p.body.flow
                ),
            )
            if not await ex.commit(
                Commit(ex.view.run.id, tokens=[token], events=[started]), unless_ended=True
            ):
                return None
        base = dict(ex.view.state)
        runner = ScatterRun(ex, ex.children, token, p)
        output, update = await runner.run(base)
        if output is None or ex.view.end is not None or token.status is S.CANCELLED:
            return None
        ex.view.last_placements = [p.id]
        return (
            await ex.move(
                Move(
                    token,
                    p,
                    output,
                    event=lambda to: runner.finished(output, to),
                    update=lambda: ex.merger.apply(ex.view.state, base, {}, [], update),
                )
            )
        ).next


_Handler = Callable[[Driver, TokenRecord, Any], Awaitable[TokenRecord | None]]
_HANDLERS: dict[str, _Handler] = {
    "task": lambda d, token, p: d.ex.task_steps.at_task(token, p),
    "wait": lambda d, token, p: d.ex.task_steps.at_wait(token, p),
    "join": lambda d, token, p: d.ex.joins.at_join(token, p),
    "scatter": Driver.at_scatter,
    "subflow": lambda d, token, p: d.ex.children.at_subflow(token, p),
    "terminal": lambda d, token, p: d.ex.task_steps.at_terminal(token, p),
    "phase": lambda d, token, p: d.ex.task_steps.at_phase(token, p),
}
"""What drives a token at each kind of placement."""
_RUNS_CODE = frozenset({"task", "scatter", "subflow"})
"""The kinds whose handler runs code (a node, items, a child run): it takes the step lock only
for its steps, never while that code runs."""
