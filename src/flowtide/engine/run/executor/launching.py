"""A run's start: lifecycle running, its pre phases, then its entrypoint's token (created, and
its first attempt started, in the run's first commit when there is no pre phase: the commit with
which the run is created in the store); and the run's deadline armed. A part the executor holds
(:class:`RunStart`), calling back only through :class:`StartHost`.
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
        self.entry: str | None = None
        """The entrypoint the run was started at (None: its main one)."""
        self.first: TokenRecord | None = None
        """The entrypoint's token, created by the run's first commit (no pre phase)."""

    def begin(self, entry: str | None) -> Commit:
        """The run's start, decided: lifecycle running and, when there is no pre phase, the
        entrypoint's token (its first attempt started too when it is a task). Returns the run's
        first commit, with which the run is created in the store
        (:class:`~flowtide.engine.run.creation.RunCreation`); :meth:`launch` then goes on."""
        self.ex.view.run.lifecycle = transition(self.ex.view.run.lifecycle, Lifecycle.RUNNING).value
        self.ex.view.run.started_at = self.ex.clock.now()
        self.entry = entry
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
        if not self.ex.flow.phases(PhaseKind.PRE):
            # No pre phase: the entrypoint's token is created in the same commit, and its
            # first attempt started there too when it is a task.
            token = self.ex.new_token(self.entry_target(entry), ())
            self.first = token
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
        # (The run is created with its record as it is now: the commit need not write it.)
        first = [self.first] if self.first is not None else []
        return Commit(self.ex.view.run.id, tokens=first, events=events, anchors=anchors, due=due)

    def abandon(self) -> None:
        """The run could not be created, or ended before its start went on: give back what
        :meth:`begin` took."""
        if self.first is not None:
            self.ex.attempts.drop_thread(self.first.id)

    def launch(self) -> None:
        """Go on from the run's first commit (stored) in a task of its own (held until it ends):
        its deadline armed, then its entrypoint's token driven, or its pre phases run first."""
        self.ex.tasks.add(asyncio.get_running_loop().create_task(self.main()))

    def launch_stored(self, entry: str | None) -> None:
        """Start a run stored without being started (lifecycle ``pending``: created by an engine
        that runs no nodes), as :meth:`launch` does, its first commit made first."""
        first = self.begin(entry)
        first.run = self.ex.view.run  # (stored pending: its record is written started)
        self.ex.tasks.add(asyncio.get_running_loop().create_task(self.main(first)))

    async def main(self, first: Commit | None = None) -> None:
        """The run's start, after its first commit (made here if given: see
        :meth:`launch_stored`): its deadline, then the entrypoint's token (after the pre phases,
        if any)."""
        task = asyncio.current_task()
        assert task is not None
        try:
            if self.ex.view.end is not None:  # (cancelled before it could start)
                self.abandon()
                return
            if first is not None:
                await self.ex.commit(first)
            self.ex.started = True
            self.arm_deadline()
            if self.ex.view.end is not None:
                self.abandon()
                return
            if self.first is not None:
                await self.ex.driver.drive(self.first)  # in this task: no task of its own
                return
            for phase in self.ex.flow.phases(PhaseKind.PRE):
                err = await self.ex.phases.run(phase)
                if self.ex.view.end is not None:
                    return
                if err is not None:
                    self.ex.request_end(Lifecycle.FAILED, [err])
                    return
            token = self.ex.new_token(self.entry_target(self.entry), ())
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
