"""A run's start: lifecycle running, its pre phases, then its entrypoint's token (created, and
its first attempt started, in the run's first commit when there is no pre phase); and the
run's deadline armed. A part the executor holds (:class:`RunStart`), calling back only through
:class:`StartHost`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from flowtide.clock import isoformat
from flowtide.engine.errors import StoreUnavailableError, unavailable
from flowtide.engine.event_types import RunStarted
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.lifecycle import Lifecycle, transition
from flowtide.engine.run.attempts import AttemptRunner
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.phases import Phases
from flowtide.engine.run.executor.ports import EndPort, StepPort
from flowtide.engine.run.executor.settling import Settling
from flowtide.engine.timing.scope import CancelReason
from flowtide.model.flow import Flow
from flowtide.model.placements import PhaseKind
from flowtide.store.base import (
    Commit,
    DueEntry,
    NodeAnchor,
    StoreConflict,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class Driving(Protocol):
    """Drives a token placement after placement (see :meth:`Driver.drive
    <flowtide.engine.run.executor.driver.Driver.drive>`)."""

    async def drive(self, token: TokenRecord | None) -> None: ...


class StartHost(StepPort, EndPort, Protocol):
    """What a run's start needs of the executor besides a step: the flow, its node code and
    phases, the attempts and arming, new tokens and their tasks, the run's tasks and deadline
    timer, settling, and ending the run."""

    started: bool
    deadline_timer: Any

    @property
    def flow(self) -> Flow: ...

    @property
    def code(self) -> FlowCode: ...

    @property
    def phases(self) -> Phases: ...

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def prestarted(self) -> set[str]: ...

    @property
    def tasks(self) -> set[asyncio.Future[Any]]: ...

    @property
    def settler(self) -> Settling: ...

    def new_token(
        self, placement: str, lineage: tuple[tuple[str, int, int], ...]
    ) -> TokenRecord: ...

    @property
    def driver(self) -> Driving: ...

    def spawn(self, token: TokenRecord) -> None: ...

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None: ...


class RunStart:
    """Starts the run, through ``ex``."""

    def __init__(self, ex: StartHost) -> None:
        self.ex = ex

    def launch(self, entry: str | None) -> None:
        """Start :meth:`main` in its own task (held until it ends)."""
        self.ex.tasks.add(asyncio.get_running_loop().create_task(self.main(entry)))

    async def main(self, entry: str | None) -> None:
        """Start the run: lifecycle running, pre phases, then the entrypoint's token."""
        task = asyncio.current_task()
        assert task is not None
        try:
            if self.ex.view.end is not None:
                return
            self.ex.view.run.lifecycle = transition(
                self.ex.view.run.lifecycle, Lifecycle.RUNNING
            ).value
            self.ex.view.run.started_at = self.ex.clock.now()
            self.ex.started = True
            pre = self.ex.flow.phases(PhaseKind.PRE)
            first: list[TokenRecord] = []
            events = [
                self.ex.event(
                    None,
                    RunStarted(
                        flow=self.ex.flow.id,
                        version=self.ex.flow.version,
                        deadline=isoformat(self.ex.view.run.deadline)
                        if self.ex.view.run.deadline
                        else None,
                    ),
                )
            ]
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            if not pre:
                # No pre phase: the entrypoint's token is created in the same commit, and its
                # first attempt started there too when it is a task.
                token = self.ex.new_token(self.entry_target(entry), ())
                first = [token]
                q = self.ex.plan.placements.get(token.placement)
                if (
                    q is not None
                    and q.kind == "task"
                    and self.ex.attempts.take_thread_now(token.id, self.ex.code.impls[q.id])
                ):
                    started, anchors, due = self.ex.arming.start_attempt(
                        token, q.id, self.ex.plan.nodes[q.id], self.ex.plan.settings[q.id]
                    )
                    events.append(started)
                    self.ex.prestarted.add(token.id)
            await self.ex.commit(
                Commit(
                    self.ex.view.run.id,
                    run=self.ex.view.run,
                    tokens=first,
                    events=events,
                    anchors=anchors,
                    due=due,
                )
            )
            self.arm_deadline()
            if self.ex.view.end is not None:
                return
            if first:
                await self.ex.driver.drive(first[0])  # in this task: no task of its own
                return
            for phase in pre:
                err = await self.ex.phases.run(phase)
                if self.ex.view.end is not None:
                    return
                if err is not None:
                    self.ex.request_end(Lifecycle.FAILED, [err])
                    return
            token = self.ex.new_token(self.entry_target(entry), ())
            await self.ex.commit(Commit(self.ex.view.run.id, tokens=[token]))
            self.ex.spawn(token)
        except Exception as exc:
            if (down := unavailable(self.ex.view.run.id, exc)) is not None:
                self.ex.lose_view(down)  # (its start is made again where it is resumed)
            else:
                self.ex.request_end(Lifecycle.FAILED, [self.ex.error_info(exc)])
        finally:
            self.ex.tasks.discard(task)
            self.ex.settler.maybe_drained()

    def entry_target(self, entry: str | None) -> str:
        if entry is not None and entry in self.ex.flow.entrypoints:
            return self.ex.flow.entrypoints[entry]
        return entry or self.ex.flow.main_entrypoint

    def arm_deadline(self) -> None:
        if self.ex.view.run.deadline is None or self.ex.view.end is not None:
            return
        deadline = self.ex.view.run.deadline

        def fire() -> None:
            self.ex.root.cancel(CancelReason.RUN_DEADLINE, deadline)

        if deadline <= self.ex.clock.now():
            fire()  # over already: no step more
            return
        self.ex.deadline_timer = self.ex.clock.call_at(deadline, fire)
