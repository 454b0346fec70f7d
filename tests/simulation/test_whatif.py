"""What-if on runs an engine recorded on a virtual clock: payments that park and are answered
at various delays, played again with edited settings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import Engine, NodeContext, Park
from flowtide.errors import FlowValidationError
from flowtide.model.flow import Flow
from flowtide.simulation.edits import bumped_version, register_edited
from flowtide.simulation.whatif import whatif
from flowtide.store import MemoryStore, SQLiteStore
from flowtide.store.base import Store

PAYMENTS = """
id: urn:test:flow:payments
version: "3"
entrypoints: {main: collect-payment}
placements:
  - id: collect-payment
    kind: task
    node: urn:test:node:collect
    settings: {timeout: PT10M}
    routes: {paid: done, timeout: expired, remind: noted}
  - {id: done, kind: terminal, outcome: paid}
  - {id: expired, kind: terminal, outcome: expired}
  - {id: noted, kind: terminal, outcome: reminded}
"""

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DELAYS = [2, 4, 6, 7, 9]
"""Minutes after its start that each recorded run's payment came."""


@node(id="urn:test:node:collect", outputs=["paid", "remind"], parks=True, register=False)
async def collect(ctx: NodeContext) -> Any:
    return Park(key=f"pay-{ctx.run_id}")


def nodes() -> NodeRegistry:
    found = NodeRegistry()
    found.register(collect)
    return found


def payments() -> Flow:
    return load_flow(PAYMENTS, format="yaml", registry=nodes())


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A store each test opens (``async with store``)."""
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "r.db")


async def record(store: Store, delays: Sequence[int | None]) -> list[str]:
    """One run per delay, each started an hour after the last, paid ``delay`` minutes after
    its start (None: never paid)."""
    clock = VirtualClock(START)
    ids = []
    try:
        async with Engine(store=store, clock=clock, flows=[payments()], registry=nodes()) as e:
            for n, delay in enumerate(delays):
                handle = await e.start("urn:test:flow:payments", {"n": n}, run_id=f"run{n:02d}")
                ids.append(handle.run_id)
                await clock.settle()
                if delay is not None:
                    await clock.advance(timedelta(minutes=delay))
                    await e.signal(key=f"pay-{handle.run_id}", output="paid", payload={"ok": n})
                await clock.advance(timedelta(hours=1) - timedelta(minutes=delay or 0))
                assert handle.done
    finally:
        await clock.aclose()
    return ids


async def test_a_shorter_timeout_expires_exactly_the_runs_paid_after_it(store: Store) -> None:
    async with store:
        ids = await record(store, DELAYS)
        report = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT5M"})
        assert report.compared == tuple(ids)
        assert report.unreproduced == () and report.skipped == ()
        (change,) = report.placements
        assert change.placement == "collect-payment"
        assert change.would_expire == ("run02", "run03", "run04")
        assert change.no_longer_expire == ()
        assert change.summary() == (
            "collect-payment: 3 of the last 5 runs would have expired (runs run02, run03, run04)"
        )
        assert [o.run_id for o in report.outcomes] == ["run02", "run03", "run04"]
        assert report.outcomes[0].before == "completed 'paid' after 6:00"
        assert report.outcomes[0].after == "completed 'expired' after 5:00"
        assert report.to_json()["placements"][0]["would_expire"] == ["run02", "run03", "run04"]


async def test_only_the_last_runs_are_played(store: Store) -> None:
    async with store:
        await record(store, DELAYS)
        report = await whatif(
            store, "urn:test:flow:payments", {"collect-payment.timeout": "PT5M"}, 2
        )
        assert report.compared == ("run03", "run04")
        assert report.placements[0].summary().startswith("collect-payment: 2 of the last 2 runs")


async def test_a_longer_timeout_saves_a_run_that_expired_only_if_removed(store: Store) -> None:
    async with store:
        await record(store, [3, None])
        longer = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT20M"})
        assert longer.placements[0].no_longer_expire == ()  # no payment came: it expires later
        assert longer.outcomes == ()  # it still expires, later: the same outcome
        unset = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": None})
        assert unset.placements[0].no_longer_expire == ("run01",)
        assert [o.after for o in unset.outcomes] == ["parked, not ended"]


async def test_a_timer_added_shows_reminders(store: Store) -> None:
    async with store:
        await record(store, DELAYS)
        timers = [{"after": "PT5M", "output": "remind"}]
        report = await whatif(store, "urn:test:flow:payments", {"collect-payment.timers": timers})
        (change,) = report.placements
        assert (change.reminders_before, change.reminders_after) == (0, 3)
        assert change.summary() == "collect-payment: 3 reminders more"
        assert report.outcomes == ()  # the reminder's branch ends; the payment still decides


async def test_a_run_that_does_not_reproduce_is_reported(store: Store) -> None:
    async with store:
        ids = await record(store, [2, 4])
        # The record says the first run ended otherwise than its history plays.
        run = await store.get_run(ids[0])
        events = list(await store.history(ids[0]))
        finished = events[-1]
        assert finished.kind == "run_finished"
        finished.data["outcome"] = "refunded"
        original = store.history

        async def tampered(run_id: str, after: int = 0) -> Sequence[Any]:
            return events if run_id == run.id else await original(run_id, after)

        store.history = tampered  # type: ignore[method-assign]
        report = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT3M"})
        assert report.compared == (ids[1],)
        (odd,) = report.unreproduced
        assert odd.run_id == ids[0]
        assert odd.recorded == "completed 'refunded' after 2:00"
        assert odd.replayed == "completed 'paid' after 2:00"
        assert any("did not reproduce" in line for line in report.lines())


@pytest.mark.parametrize(
    ("edits", "said"),
    [
        ({"collect-payment.timeout": "soon"}, "collect-payment.timeout: "),
        ({"collect-payment.timeout": "-PT1M"}, "collect-payment.timeout: "),
        ({"collect-payment.colour": 1}, "collect-payment.colour: no setting 'colour'"),
        ({"pay.timeout": "PT1M"}, "pay.timeout: urn:test:flow:payments has no placement 'pay'"),
        ({"done.timeout": "PT1M"}, "done.timeout: placement 'done' is a terminal"),
        ({"timeout": "PT1M"}, "an edit is named PLACEMENT.SETTING"),
        ({"collect-payment.timers": [{"after": "PT1M"}]}, "collect-payment.timers.0.output"),
    ],
)
async def test_bad_edits_are_refused_naming_placement_and_setting(
    store: Store, edits: dict[str, Any], said: str
) -> None:
    async with store:
        await record(store, [2])
        with pytest.raises(FlowValidationError) as refused:
            await whatif(store, "urn:test:flow:payments", edits)
        assert said in str(refused.value)


async def test_an_edit_the_flow_cannot_hold_is_refused() -> None:
    store = MemoryStore()
    await record(store, [2])
    timers = [{"after": "PT5M", "output": "escalate"}]  # an output nothing routes
    with pytest.raises(FlowValidationError, match="edited flow is not valid"):
        await whatif(store, "urn:test:flow:payments", {"collect-payment.timers": timers})


async def test_register_edited_makes_a_new_version_new_runs_use(store: Store) -> None:
    async with store:
        await record(store, [2])
        done = await register_edited(
            store, "urn:test:flow:payments", {"collect-payment.timeout": 60_000}
        )
        assert (done.version, done.new) == ("4", True)
        latest = await store.latest_flow("urn:test:flow:payments")
        assert latest.digest == done.digest
        assert latest.document["placements"][0]["settings"] == {"timeout": "PT1M"}
        old = await store.get_run("run00")
        assert old.flow_version == "3"  # a run already started keeps its version


def test_version_labels_are_bumped() -> None:
    assert bumped_version("3") == "4"
    assert bumped_version("v1.2") == "v1.3"
    assert bumped_version("beta") == "beta+edit"
    assert bumped_version("3", ["4"]) == "5"


CHARGES = """
id: urn:test:flow:charges
entrypoints: {main: charge}
placements:
  - id: charge
    kind: task
    node: urn:test:node:flaky
    settings: {retry: {max_attempts: 3, backoff: fixed, initial: PT10S}}
    routes: {paid: done}
  - {id: done, kind: terminal, outcome: paid}
"""


@node(id="urn:test:node:flaky", outputs=["paid"], register=False)
async def flaky(ctx: NodeContext) -> str:
    """Fails as many first attempts as the input says."""
    if ctx.attempt <= int(ctx.state["fails"]):
        raise ConnectionError("gateway down")
    return "paid"


async def record_charges(store: Store, fails: Sequence[int], cancelled: bool = False) -> None:
    registry = NodeRegistry()
    registry.register(flaky)
    registry.register(collect)
    charges = load_flow(CHARGES, format="yaml", registry=registry)
    clock = VirtualClock(START)
    try:
        async with Engine(
            store=store, clock=clock, flows=[charges, payments()], registry=registry
        ) as e:
            for n, count in enumerate(fails):
                handle = await e.start(charges.id, {"fails": count}, run_id=f"charge{n}")
                await clock.advance(timedelta(hours=1))
                assert handle.done
            if cancelled:
                parked = await e.start("urn:test:flow:payments", {}, run_id="dropped")
                await clock.settle()
                await e.cancel(parked.run_id, "changed my mind")
                await clock.settle()
    finally:
        await clock.aclose()


async def test_fewer_attempts_mean_fewer_retries_and_a_failed_run(store: Store) -> None:
    async with store:
        await record_charges(store, [0, 1, 2])
        retry = {"max_attempts": 2, "backoff": "fixed", "initial": "PT10S"}
        report = await whatif(store, "urn:test:flow:charges", {"charge.retry": retry})
        assert report.compared == ("charge0", "charge1", "charge2")
        (change,) = report.placements
        assert (change.retries_before, change.retries_after) == (3, 2)
        assert change.summary() == "charge: 1 retry fewer"
        (changed,) = report.outcomes
        assert changed.run_id == "charge2"
        assert changed.before == "completed 'paid' after 0:20"
        assert changed.after == "failed after 0:10"
        more = await whatif(store, "urn:test:flow:charges", {"charge.retry": None})
        assert more.placements[0].summary() == "charge: 3 retries fewer"


async def test_runs_of_other_versions_and_cancelled_runs_are_left_out_and_counted() -> None:
    store = MemoryStore()
    async with store:
        await record(store, [2, 8])
        await record_charges(store, [], cancelled=True)
        await register_edited(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT9M"})
        on_new = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT5M"})
        assert (on_new.version, on_new.taken, on_new.other_versions) == ("4", 0, 3)
        assert on_new.placements[0].summary() == "collect-payment: no change over the last 0 runs"
        assert "3 run(s) of earlier versions of the flow left out (only version 4 is played)" in (
            on_new.lines()
        )

    store = MemoryStore()
    async with store:
        await record(store, [2])
        await record_charges(store, [], cancelled=True)
        report = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT1M"})
        assert report.compared == ("run00",)
        (skipped,) = report.skipped
        assert skipped.run_id == "dropped"
        assert skipped.reason == "it was cancelled (a cancel is not played again)"


ASK = """
id: urn:test:flow:ask
entrypoints: {main: ask}
placements:
  - id: ask
    kind: task
    node: urn:test:node:ask
    settings: {timeout: PT10M}
    routes: {approved: done, declined: refused, timeout: expired}
  - {id: done, kind: terminal, outcome: approved}
  - {id: refused, kind: terminal, outcome: declined}
  - {id: expired, kind: terminal, outcome: expired}
"""


@node(id="urn:test:node:ask", outputs=["approved", "declined"], parks=True, register=False)
async def ask(ctx: NodeContext) -> Any:
    """Parks; run again by a signal, it answers what the signal's payload says."""
    if ctx.signal is None:
        return Park(key=f"ask-{ctx.run_id}")
    return "approved" if ctx.signal.get("answer") else "declined"


async def test_a_signal_the_node_decides_on_is_played_as_the_nodes_next_attempt() -> None:
    registry = NodeRegistry()
    registry.register(ask)
    flow = load_flow(ASK, format="yaml", registry=registry)
    store = MemoryStore()
    clock = VirtualClock(START)
    async with store:
        try:
            async with Engine(store=store, clock=clock, flows=[flow], registry=registry) as e:
                for n, (minutes, answer) in enumerate([(1, True), (3, False), (8, True)]):
                    handle = await e.start(flow.id, {}, run_id=f"ask{n}")
                    await clock.settle()
                    await clock.advance(timedelta(minutes=minutes))
                    await e.signal(key=f"ask-ask{n}", payload={"answer": answer})
                    await clock.advance(timedelta(hours=1))
                    assert handle.done
        finally:
            await clock.aclose()
        report = await whatif(store, flow.id, {"ask.timeout": "PT2M"})
    assert report.unreproduced == () and report.skipped == ()
    assert report.placements[0].would_expire == ("ask1", "ask2")
    assert [(o.before, o.after) for o in report.outcomes] == [
        ("completed 'declined' after 3:00", "completed 'expired' after 2:00"),
        ("completed 'approved' after 8:00", "completed 'expired' after 2:00"),
    ]


async def test_a_run_whose_state_a_script_cannot_carry_is_left_out_saying_why() -> None:
    store = MemoryStore()
    async with store:
        await record(store, [2, 3])
        original = store.get_state

        async def too_deep(run_id: str) -> dict[str, Any]:
            if run_id != "run00":
                return await original(run_id)
            deep: Any = 1
            for _ in range(200):
                deep = [deep]
            return {"deep": deep}

        store.get_state = too_deep  # type: ignore[method-assign]
        report = await whatif(store, "urn:test:flow:payments", {"collect-payment.timeout": "PT1M"})
    assert report.compared == ("run01",)
    (skipped,) = report.skipped
    assert skipped.run_id == "run00"
    assert skipped.reason.startswith("its record cannot be played: ")
    assert "levels deep" in skipped.reason
