"""A run's view is data: made from a run record and its state, everything else empty."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from flowtide.engine.run.view import RunView
from flowtide.store.base import RunRecord


def test_a_view_starts_from_its_run_and_state_with_nothing_else() -> None:
    run = RunRecord("r", "urn:f", "1", "pending", datetime(2026, 1, 1, tzinfo=UTC))
    view = RunView(run, {"a": 1})
    assert view.run is run and view.state == {"a": 1}
    assert (view.tokens, view.parks, view.anchors, view.joins) == ({}, {}, {}, {})
    assert (view.end, view.outcome, view.terminals) == (None, None, [])
    # Two views share nothing.
    other = RunView(run, {})
    assert all(
        getattr(view, f.name) is not getattr(other, f.name)
        for f in fields(RunView)
        if f.name not in ("run", "end", "outcome")
    )
