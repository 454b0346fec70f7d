"""Settling through a stand-in for the executor, without an engine: a run nothing drives any
more ends (completed, or failed when no terminal was reached), a run left with a parked token
is given back to the store and let go, and a pin holds it while a signal works on it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from flowtide.engine.lifecycle import Lifecycle
from flowtide.store.base import ParkRecord, TokenStatus
from tests.engine.run.stand_in import DrivenRun, one_task_run

S = TokenStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run() -> DrivenRun:
    return one_task_run("urn:test:flow:settling", T0)


def test_a_run_nothing_drives_ends_by_the_terminals_it_reached() -> None:
    reached = run()
    reached.view.terminals.append("end")
    reached.settler.maybe_drained()
    assert [lc for lc, _ in reached.ends] == [Lifecycle.COMPLETED]
    none = run()
    none.settler.maybe_drained()
    ((lifecycle, errors),) = none.ends
    assert lifecycle is Lifecycle.FAILED and errors[0].type == "DrainedWithoutTerminal"


async def test_a_run_left_parked_is_given_back_to_the_store_and_let_go() -> None:
    ex = run()
    t = ex.token("ask", S.PARKED)
    ex.view.parks[t.id] = ParkRecord("p1", "r", t.id, "ask", t.visit, 0, T0, key="k")
    assert ex.settler.quiescent()
    ex.settler.maybe_drained()
    assert ex.settler.settling is not None
    await ex.settler.settling
    (given,) = ex.commits
    assert given.release and given.run is ex.view.run
    assert ex.view.run.lifecycle == "parked" and ex.view.run.checkpoint is not None
    assert ex.released and ex.recording.said() == ["let_go", "settled"]
    result = ex.recording.told[-1][1]
    assert [p.key for p in result.parked] == ["k"]  # type: ignore[attr-defined]
    assert ex.settler.parked_now() is not None
    assert not ex.settler.pin()  # (let go: a signal rebuilds the run from the store)


async def test_a_pin_holds_the_run_until_it_is_taken_out() -> None:
    ex = run()
    ex.token("ask", S.PARKED)
    assert ex.settler.pin()
    ex.settler.maybe_drained()
    assert ex.settler.settling is None and not ex.settler.quiescent()
    ex.settler.unpin()
    assert ex.settler.settling is not None
    ex.settler.settling.cancel()
    await asyncio.gather(ex.settler.settling, return_exceptions=True)
