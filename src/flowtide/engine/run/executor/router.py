"""Moving a token along an output: one commit for the move, the next attempt's start, anchors
released and due entries dropped (where it goes decided in :mod:`flowtide.engine.run.routing`).
A part the executor holds, calling back only through :class:`RouterHost`; it does not fire
joins itself: it says when a join group may fire
(:attr:`~flowtide.engine.run.move.Moved.joins_due`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from flowtide.engine.errors import (
    UnroutedOutputError,
)
from flowtide.engine.flows.code import FlowCode
from flowtide.engine.result import InterruptedAt
from flowtide.engine.run.attempts import AttemptRunner
from flowtide.engine.run.executor.arming import Arming
from flowtide.engine.run.executor.attempts import TokenAttempts
from flowtide.engine.run.executor.closing import RunClosing, StateUpdate
from flowtide.engine.run.executor.ports import StepPort
from flowtide.engine.run.executor.records import move_token, terminal_event
from flowtide.engine.run.joins import (
    arrive,
    expect_branches,
    judges_move,
    note_moves,
    withdraw,
)
from flowtide.engine.run.marks import carries_marks, sets_outcome
from flowtide.engine.run.move import NOT_MOVED, Move, Moved
from flowtide.engine.run.routing import arriving, ending, starting, targets_of
from flowtide.model.placements import (
    AnyPlacement,
    Terminal,
)
from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    NodeAnchor,
    ParkStatus,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus


class RouterHost(StepPort, Protocol):
    """What moving tokens needs of the executor besides a step: the node code and its attempts,
    arming, token visits and splits, parks, tasks, and failing the run."""

    @property
    def code(self) -> FlowCode: ...

    @property
    def attempts(self) -> AttemptRunner: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def prestarted(self) -> set[str]: ...

    def next_visit(self, placement: str) -> int: ...

    def split_tokens(
        self, token: TokenRecord, targets: Sequence[str], split: str
    ) -> list[TokenRecord]: ...

    def spawn(self, token: TokenRecord) -> None: ...

    def close_park(self, token: TokenRecord, status: ParkStatus, by: str) -> None: ...

    def fail_token(
        self, token: TokenRecord, exc: BaseException, interrupted: InterruptedAt | None = None
    ) -> None: ...


class StepEnding(Protocol):
    """The run's end as a move sees it: folded into the move's commit when the move takes the
    run's last tokens to terminals (see :meth:`RunEnding.closing
    <flowtide.engine.run.executor.ending.RunEnding.closing>`)."""

    def closing(
        self,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
        update: StateUpdate | None,
    ) -> RunClosing | None:
        """The run's end, to fold into ``c`` (a move's commit of ``ending`` to their
        terminals), if that move ends the run; None: it does not, or not alone."""

    def ended_by_step(self, closing: RunClosing) -> None:
        """A step's commit ended the run (see :meth:`closing`)."""


class Router:
    """Moves the run's tokens along outputs, through ``ex``; a move that ends the run folds
    the end into its commit, through ``ending``."""

    def __init__(self, ex: RouterHost, ending: StepEnding) -> None:
        self.ex = ex
        self.ending = ending

    async def move(self, m: Move) -> Moved:
        """Move ``token`` along ``output`` (a split makes new tokens), committing it all: the
        first moved token is the one to go on with and the others get tasks of their own.
        ``event`` gives the move's event payload once the targets are known; it is recorded
        for the token as it is before the move.

        The token's due entries (park deadline, timers, backoff) are dropped, its open park is
        closed (as moved on, unless the caller closed it already), and node anchors are released
        when ``output`` is in the placement's ``release_on`` or is ``timeout``, or when the move
        leaves an anchored placement's loop. ``requests`` (answers to signal requests) and
        ``fired`` (due entries) go with the move's commit. Part of a step: the caller holds the
        step lock (the executor's ``move`` does, and fires the join groups the move made ready in
        the same step)."""
        ex, token, p, output, event = self.ex, m.token, m.placement, m.output, m.event
        due_cleared = m.due_cleared
        targets = targets_of(p, output)
        if not targets:
            await self._unrouted(token, p, output, ex.event(token, event(None)), m.extra_events)
            return NOT_MOVED
        moving = ex.event(token, event(list(targets)))
        if carries_marks(token) or token.id in ex.view.parks:
            due_cleared = [*due_cleared, token.id]
            ex.close_park(token, ParkStatus.SIGNALLED, "moved")
        released = ex.arming.releases(token, p, output, targets) if ex.view.anchors else []
        moved, split_id = self._move(token, p, targets)
        events = [moving, *m.extra_events]
        nxt = [t for t in moved if t.status is S.READY]
        arrived = self._arrivals(nxt, events)
        ending = self._ends_of(nxt, events)
        nxt = [t for t in nxt if t.status is S.READY]
        anchors: list[NodeAnchor] = []
        due: list[DueEntry] = []
        prestarted = [] if released else self._prestart(nxt, split_id, events, anchors, due)
        c = Commit(
            ex.view.run.id,
            tokens=[*moved, *m.extra],
            events=events,
            due_cleared=due_cleared,
            due=due,
            anchors=anchors,
            anchors_released=released,
            signal_answers=m.answers,
            requests_answered=m.requests,
            due_fired=m.fired,
        )
        closing = self.ending.closing(c, ending, released, m.update) if ending else None
        step = closing.update if closing is not None else m.update
        try:
            ok = await ex.commit(c, unless_ended=True, token=token, update=step)
        except BaseException:
            if closing is not None:
                closing.failed()
            raise
        if not ok:
            for t_id in prestarted:
                ex.token_attempts.not_started(t_id)
            for t, _ in ending:
                t.status = S.READY
            for t in arrived:
                withdraw(ex.view.joins, t, t.placement)
            return NOT_MOVED
        self._apply_move(prestarted, ending, released)
        if closing is not None:
            self.ending.ended_by_step(closing)
        for other in nxt[1:]:
            ex.spawn(other)
        joins_due = bool(arrived) or (
            judges_move(ex.view.joins, ex.plan, targets, split_id)
            and note_moves(ex.view.joins, ex.plan, nxt)
        )
        return Moved(True, nxt[0] if nxt else None, joins_due)

    def _apply_move(
        self,
        prestarted: Sequence[str],
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
    ) -> None:
        """A move is committed: its started attempts, ended tokens and released anchors."""
        ex = self.ex
        ex.prestarted.update(prestarted)
        for t, q in ending:
            ex.view.tokens.pop(t.id, None)
            ex.view.terminals.append(q.id)
            if ex.view.outcome is None and sets_outcome(t):
                ex.view.outcome = q.outcome
        for key in released:
            ex.view.anchors.pop(key, None)

    async def _unrouted(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        output: str,
        event: EventRecord,
        extra_events: Sequence[EventRecord],
    ) -> None:
        """``output`` routes nowhere: its event is recorded, and the run fails."""
        ex = self.ex
        err = UnroutedOutputError(p.id, output, list(p.route_map()))
        await ex.commit(Commit(ex.view.run.id, events=[event, *extra_events]), unless_ended=True)
        ex.fail_token(token, err)

    def _move(
        self, token: TokenRecord, p: AnyPlacement, targets: Sequence[str]
    ) -> tuple[list[TokenRecord], str | None]:
        """The tokens a move makes or moves, and the split it opens (None: one target)."""
        ex = self.ex
        if len(targets) == 1:
            move_token(token, targets[0], ex.next_visit(targets[0]))
            return [token], None
        token.epoch += 1
        split = f"{token.id}/{p.id}#{token.visit}"
        token.status = S.DONE
        ex.view.tokens.pop(token.id, None)
        expect_branches(ex.view.joins, ex.plan, split, len(targets), token.lineage, targets)
        return ex.split_tokens(token, targets, split), split

    def _arrivals(
        self, moved: Sequence[TokenRecord], events: list[EventRecord]
    ) -> list[TokenRecord]:
        """A branch's move to its join also records its arrival there, in the move's commit
        (see :func:`~flowtide.engine.run.routing.arriving`): the join is judged once it is
        stored (:attr:`~flowtide.engine.run.move.Moved.joins_due`)."""
        ex = self.ex
        arrived = arriving(ex.plan, moved)
        events.extend(ex.event(t, arrive(ex.view.joins, t, t.placement)) for t in arrived)
        return arrived

    def _ends_of(
        self, moved: Sequence[TokenRecord], events: list[EventRecord]
    ) -> list[tuple[TokenRecord, Terminal]]:
        """A move to a terminal that does not fail the run also records the terminal, in the
        move's commit (only while no join is open: a join may still count the token)."""
        ex = self.ex
        ends = ending(ex.plan, ex.view.joins, moved)
        for t, q in ends:
            t.status = S.DONE
            events.append(terminal_event(ex.view.run.id, ex.clock.now(), t, q))
        return ends

    def _prestart(
        self,
        moved: Sequence[TokenRecord],
        split_id: str | None,
        events: list[EventRecord],
        anchors: list[NodeAnchor],
        due: list[DueEntry],
    ) -> list[str]:
        """One commit per step: the move also starts the next attempt of each moved token that
        arrives at a task (unless a join may still act on it: see
        :func:`~flowtide.engine.run.routing.starting`); returns their ids."""
        ex = self.ex
        prestarted: list[str] = []
        plan = ex.plan
        for t in starting(plan, ex.view.joins, moved, split_id):
            q = t.placement
            if not ex.attempts.take_thread_now(t.id, ex.code.impls[q]):
                continue  # (it starts once a thread is free for it)
            begun, new_anchors, new_due = ex.arming.start_attempt(
                t, q, plan.nodes[q], plan.settings[q]
            )
            events.append(begun)
            anchors.extend(new_anchors)
            due.extend(new_due)
            prestarted.append(t.id)
        return prestarted
