"""A run's end folded into the commit of its last step: when a move takes the run's last
tokens to terminals and nothing else is left to do (no other token, task, child run, post
phase or cancel to answer), the step's commit also records the end (``run_finished`` after the
step's events, the run's lifecycle, outcome and result) and gives the run back, instead of a
commit of its own after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from flowtide.clock import Clock
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.result import RunResult
from flowtide.engine.run.children import parent_wake
from flowtide.engine.run.executor.records import end_result, finish
from flowtide.engine.run.marks import sets_outcome
from flowtide.engine.run.view import RunEnd, RunView
from flowtide.model.placements import Terminal
from flowtide.store.base import Commit, RunRecord, TokenRecord

StateUpdate = Callable[[], tuple[dict[str, Any], list[str]]]


class RunClosing:
    """The end of the run, put on ``c`` (the commit of the move of ``ending`` to their
    terminals) once the step's state change is applied: :meth:`update` is the step's update."""

    def __init__(
        self,
        view: RunView,
        clock: Clock,
        c: Commit,
        ending: Sequence[tuple[TokenRecord, Terminal]],
        update: StateUpdate | None,
    ) -> None:
        self._view = view
        self._clock = clock
        self._commit = c
        self._ending = ending
        self._update = update
        self.end = RunEnd(Lifecycle.COMPLETED, [], None)
        self.result: RunResult | None = None
        self.run: RunRecord | None = None
        """The run's record as the commit writes it (the view's own is changed once it has
        committed)."""

    def update(self) -> tuple[dict[str, Any], list[str]]:
        """The step's state change, then the run's end on its commit (its result carries the
        state as the step leaves it)."""
        written, removed = self._update() if self._update is not None else ({}, [])
        view, c = self._view, self._commit
        terminals = [*view.terminals, *(q.id for _, q in self._ending)]
        outcome = view.outcome
        for t, q in self._ending:
            if outcome is None and sets_outcome(t):
                outcome = q.outcome
        result = end_result(
            view.run.id,
            Lifecycle.COMPLETED,
            dict(view.state),
            terminals,
            outcome,
            warnings=view.warnings,
        )
        run = replace(view.run)
        now = self._clock.now()
        c.events = [*c.events, finish(run, result, now)]
        c.run = run
        c.release = True
        c.wakes = [*c.wakes, *parent_wake(run, now)]  # (a subflow's child: its parent)
        if run.deadline is not None:
            c.due_cleared = [*c.due_cleared, run.id]  # (the run deadline's entry)
        self.result, self.run = result, run
        # Decided: from now on the run is ending (a cancel or a deadline coming while the
        # commit is on its way finds it ended, as it will be once the commit has applied).
        view.end = self.end
        return written, removed

    def failed(self) -> None:
        """The commit did not apply (this view of the run is dropped): not ending after all."""
        if self._view.end is self.end:
            self._view.end = None

    def committed(self) -> RunResult:
        """The commit applied: the view's record is the one it wrote; the run's result."""
        assert self.run is not None and self.result is not None
        run = self._view.run
        run.lifecycle = self.run.lifecycle
        run.finished_at = self.run.finished_at
        run.outcome = self.run.outcome
        run.result = self.run.result
        return self.result
