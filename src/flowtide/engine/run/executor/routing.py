"""Moving a token along an output: one commit for the move, the next attempt's start, anchors
released and due entries dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowtide.engine.errors import (
    UnroutedOutputError,
)
from flowtide.engine.event_types import Moving
from flowtide.engine.run.executor.core import RunCore
from flowtide.engine.run.executor.ports import StepPort
from flowtide.engine.run.executor.records import move_token, terminal_event
from flowtide.engine.run.joins import (
    expect_branches,
    judges_move,
    note_moves,
)
from flowtide.engine.run.marks import carries_marks, sets_outcome
from flowtide.engine.run.routing import ending, starting, targets_of
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
    RequestAnswer,
    TokenRecord,
    TokenStatus,
)

S = TokenStatus
MoveEvent = Callable[[list[str] | None], Moving]
"""The payload of a move's event given where the token goes (None: its output routes nowhere).
(A builder rather than a payload: the payload is made once, with ``to``, not copied.)"""


@dataclass(frozen=True, slots=True)
class Moved:
    """What a move along an output came to."""

    committed: bool
    """Whether the move was committed (not: the run ended first, or the output routes nowhere)."""
    next: TokenRecord | None = None
    """The moved token to go on with (None: it arrived at a join, ended, or was not moved)."""


NOT_MOVED = Moved(False)


class MovePort(StepPort, Protocol):
    """A part that moves tokens along outputs (see :meth:`Routing.move`)."""

    async def move(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        output: str,
        *,
        event: MoveEvent,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        extra: Sequence[TokenRecord] = (),
        extra_events: Sequence[EventRecord] = (),
        due_cleared: Sequence[str] = (),
        answers: Sequence[Any] = (),
        requests: Sequence[RequestAnswer] = (),
        fired: Sequence[DueEntry] = (),
    ) -> Moved: ...


class Routing(RunCore):
    """Routes."""

    async def move(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        output: str,
        *,
        event: MoveEvent,
        update: Callable[[], tuple[dict[str, Any], list[str]]] | None = None,
        extra: Sequence[TokenRecord] = (),
        extra_events: Sequence[EventRecord] = (),
        due_cleared: Sequence[str] = (),
        answers: Sequence[Any] = (),
        requests: Sequence[RequestAnswer] = (),
        fired: Sequence[DueEntry] = (),
    ) -> Moved:
        """Move ``token`` along ``output`` (a split makes new tokens), committing it all: the
        first moved token is the one to go on with and the others get tasks of their own.
        ``event`` gives the move's event payload once the targets are known; it is recorded
        for the token as it is before the move.

        The token's due entries (park deadline, timers, backoff) are dropped, its open park is
        closed (as moved on, unless the caller closed it already), and node anchors are released
        when ``output`` is in the placement's ``release_on`` or is ``timeout``, or when the move
        leaves an anchored placement's loop. ``requests`` (answers to signal requests) and
        ``fired`` (due entries) go with the move's commit. One step, under the step lock."""
        async with self.steps.hold():
            targets = targets_of(p, output)
            if not targets:
                await self._unrouted(token, p, output, self.event(token, event(None)), extra_events)
                return NOT_MOVED
            moving = self.event(token, event(list(targets)))
            if carries_marks(token) or token.id in self.view.parks:
                due_cleared = [*due_cleared, token.id]
                self.close_park(token, ParkStatus.SIGNALLED, "moved")
            released = self.arming.releases(token, p, output, targets) if self.view.anchors else []
            moved, split_id = self._move(token, p, targets)
            events = [moving, *extra_events]
            nxt = [t for t in moved if t.status is S.READY]
            ending = self._ends_of(nxt, events)
            nxt = [t for t in nxt if t.status is S.READY]
            anchors: list[NodeAnchor] = []
            due: list[DueEntry] = []
            prestarted = [] if released else self._prestart(nxt, split_id, events, anchors, due)
            c = Commit(
                self.view.run.id,
                tokens=[*moved, *extra],
                events=events,
                due_cleared=due_cleared,
                due=due,
                anchors=anchors,
                anchors_released=released,
                signal_answers=answers,
                requests_answered=requests,
                due_fired=fired,
            )
            closing = self.closing(c, ending, released, update) if ending else None
            step = closing.update if closing is not None else update
            try:
                ok = await self.commit(c, unless_ended=True, token=token, update=step)
            except BaseException:
                if closing is not None:
                    closing.failed()
                raise
            if not ok:
                for t_id in prestarted:
                    self.token_attempts.not_started(t_id)
                for t, _ in ending:
                    t.status = S.READY
                return NOT_MOVED
            self._apply_move(prestarted, ending, released)
            if closing is not None:
                self.ended_by_step(closing)
            for other in nxt[1:]:
                self.spawn(other)
            if judges_move(self.view.joins, self.plan, targets, split_id) and note_moves(
                self.view.joins, self.plan, nxt
            ):
                await self.evaluate_joins()
            return Moved(True, nxt[0] if nxt else None)

    def _apply_move(
        self,
        prestarted: Sequence[str],
        ending: Sequence[tuple[TokenRecord, Terminal]],
        released: Sequence[tuple[str, str | None]],
    ) -> None:
        """A move is committed: its started attempts, ended tokens and released anchors."""
        self.prestarted.update(prestarted)
        for t, q in ending:
            self.view.tokens.pop(t.id, None)
            self.view.terminals.append(q.id)
            if self.view.outcome is None and sets_outcome(t):
                self.view.outcome = q.outcome
        for key in released:
            self.view.anchors.pop(key, None)

    async def _unrouted(
        self,
        token: TokenRecord,
        p: AnyPlacement,
        output: str,
        event: EventRecord,
        extra_events: Sequence[EventRecord],
    ) -> None:
        """``output`` routes nowhere: its event is recorded, and the run fails."""
        err = UnroutedOutputError(p.id, output, list(p.route_map()))
        await self.commit(
            Commit(self.view.run.id, events=[event, *extra_events]), unless_ended=True
        )
        self.fail_token(token, err)

    def _move(
        self, token: TokenRecord, p: AnyPlacement, targets: Sequence[str]
    ) -> tuple[list[TokenRecord], str | None]:
        """The tokens a move makes or moves, and the split it opens (None: one target)."""
        if len(targets) == 1:
            move_token(token, targets[0], self.next_visit(targets[0]))
            return [token], None
        token.epoch += 1
        split = f"{token.id}/{p.id}#{token.visit}"
        token.status = S.DONE
        self.view.tokens.pop(token.id, None)
        expect_branches(self.view.joins, self.plan, split, len(targets), token.lineage, targets)
        return self.split_tokens(token, targets, split), split

    def _ends_of(
        self, moved: Sequence[TokenRecord], events: list[EventRecord]
    ) -> list[tuple[TokenRecord, Terminal]]:
        """A move to a terminal that does not fail the run also records the terminal, in the
        move's commit (only while no join is open: a join may still count the token)."""
        ends = ending(self.plan, self.view.joins, moved)
        for t, q in ends:
            t.status = S.DONE
            events.append(terminal_event(self.view.run.id, self.clock.now(), t, q))
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
        prestarted: list[str] = []
        plan = self.plan
        for t in starting(plan, self.view.joins, moved, split_id):
            q = t.placement
            if not self.attempts.take_thread_now(t.id, self.code.impls[q]):
                continue  # (it starts once a thread is free for it)
            begun, new_anchors, new_due = self.arming.start_attempt(
                t, q, plan.nodes[q], plan.settings[q]
            )
            events.append(begun)
            anchors.extend(new_anchors)
            due.extend(new_due)
            prestarted.append(t.id)
        return prestarted
