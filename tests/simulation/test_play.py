"""Playing a script without the command line: scripted outcomes, signals and their answers, the
windows and the result, all on the virtual clock."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from flowtide.engine import Lifecycle
from flowtide.errors import FlowValidationError
from flowtide.simulation import Moment, Timeline, play_script
from tests.simulation.flows import (
    CHARGE,
    CRUNCH,
    LOOP,
    PARENT,
    REVIEW,
    SLOW,
    flow,
    registry,
    script,
    with_charge,
)

MINUTE = timedelta(minutes=1)


def said(timeline: Timeline, kind: str | None = None) -> list[tuple[timedelta, str]]:
    """(time since the start, words) of each moment (of ``kind``)."""
    return [(m.after, m.text) for m in timeline.moments if kind is None or m.kind == kind]


def first(timeline: Timeline, kind: str) -> Moment:
    return next(m for m in timeline.moments if m.kind == kind)


async def test_a_scripted_output_after_a_delay_on_the_virtual_clock() -> None:
    played = await play_script(
        script("nodes: {charge: [{after: PT2M, output: paid}]}"), flow(CHARGE)
    )
    assert said(played, "node_started") == [
        (0 * MINUTE, "charge started, window ends +5:00 (anchored at this attempt's start, +0:00)")
    ]
    assert said(played, "node_finished") == [(2 * MINUTE, "charge returned 'paid' → done")]
    result = played.result
    assert (result.lifecycle, result.outcome) == (Lifecycle.COMPLETED, "paid")
    assert result.ended_at is not None and played.since(result.ended_at) == 2 * MINUTE
    assert result.stopped_at == result.ended_at


async def test_scripted_raises_are_retried_with_the_placements_own_retry_policy() -> None:
    steps = "nodes: {charge: [{raise: gateway down}, {raise: gateway down}, {output: paid}]}"
    played = await play_script(script(steps), flow(CHARGE))
    failed = said(played, "node_failed")
    assert failed == [
        (timedelta(seconds=0), "charge failed: ScriptedFailure: gateway down"),
        (timedelta(seconds=10), "charge failed: ScriptedFailure: gateway down"),
    ]
    assert [text for _, text in said(played, "node_retried")] == [
        "charge will try again: attempt 2 at +0:10 (after ScriptedFailure)",
        "charge will try again: attempt 3 at +0:20 (after ScriptedFailure)",
    ]
    assert said(played, "node_finished") == [
        (timedelta(seconds=20), "charge returned 'paid' → done")
    ]
    assert played.result.outcome == "paid"


async def test_a_step_slower_than_the_window_times_out() -> None:
    played = await play_script(
        script("nodes: {charge: [{after: PT10M, output: paid}]}"), flow(CHARGE)
    )
    assert said(played, "node_timed_out") == [
        (5 * MINUTE, "charge timed out: its window of PT5M ended at +5:00 → late")
    ]
    assert played.result.outcome == "late"
    (window,) = played.windows
    assert (window.placement, window.kind, window.anchor) == ("charge", "timeout", "park")
    assert window.deadline is not None and played.since(window.deadline) == 5 * MINUTE
    # The scripted node keeps the settings the flow document declares, and says where from.
    assert (window.source, window.anchor_source) == ("node type", "default")
    assert window.ending == "timed_out"


async def test_a_park_taken_by_a_signal_with_an_output() -> None:
    text = """
    nodes: {charge: [{park: {key: pay-1, payload: {amount: 10}}}]}
    signals: [{at: PT1M, key: pay-1, output: paid}]
    """
    played = await play_script(script(text), flow(CHARGE))
    assert said(played)[2:5] == [
        (
            timedelta(0),
            "charge parked (key pay-1), window ends +5:00 (anchored at this park, +0:00)",
        ),
        (MINUTE, "signal key pay-1, output 'paid': accepted"),
        (MINUTE, "charge took the signal: output 'paid' → done"),
    ]
    (sent,) = played.signals
    assert (sent.accepted, sent.reached, sent.index) == (True, "charge", 0)
    assert played.result.outcome == "paid"


async def test_a_signal_after_the_window_is_refused_as_expired() -> None:
    text = """
    nodes: {charge: [{park: {key: pay-1}}]}
    signals:
      - {at: PT7M, key: pay-1, output: paid}
      - {at: PT8M, key: nobody, output: paid}
    """
    played = await play_script(script(text), flow(CHARGE))
    assert [text for _, text in said(played, "signal")] == [
        "signal key pay-1, output 'paid': refused, expired: the park's window ended at +5:00",
        "signal key nobody, output 'paid': refused, unknown: no park matches it",
    ]
    late, nobody = played.signals
    assert (late.reason, nobody.reason) == ("expired", "unknown")
    assert late.closed_at is not None and played.since(late.closed_at) == 5 * MINUTE
    assert played.result.outcome == "late"
    # The clock played on to the last signal.
    assert played.since(played.result.stopped_at) == 8 * MINUTE


async def test_what_is_due_at_a_signals_instant_happens_before_the_signal() -> None:
    text = """
    nodes: {charge: [{park: {key: pay-1}}]}
    signals: [{at: PT5M, key: pay-1, output: paid}]
    """
    played = await play_script(script(text), flow(CHARGE))
    kinds = [m.kind for m in played.moments if m.after == 5 * MINUTE]
    assert kinds == ["node_timed_out", "terminal_reached", "run_finished", "signal"]
    assert played.signals[0].reason == "expired"


async def test_steps_used_up_without_an_implementation_fail_the_attempt_naming_it() -> None:
    played = await play_script(script("nodes: {charge: [{raise: gateway down}]}"), flow(CHARGE))
    assert played.result.lifecycle is Lifecycle.FAILED
    (error,) = played.result.errors
    assert error.type == "ScriptUsedUp"
    assert error.message.startswith(
        "placement 'charge': its 1 scripted step(s) are used up, and node 'urn:test:node:charge' "
        "has no implementation to run"
    )


async def test_steps_used_up_then_the_real_implementation_runs() -> None:
    steps = script("nodes: {charge: [{raise: gateway down}]}")
    played = await play_script(steps, flow(CHARGE), registry=with_charge())
    assert played.result.outcome == "paid"
    assert played.result.state["charged_by"] == "the real node"
    assert [m.attempt for m in played.moments if m.kind == "node_started"] == [1, 2]


async def test_outputs_parks_and_updates_set_the_state() -> None:
    text = """
    input: {order: 42}
    nodes:
      charge:
        - {park: {key: k}, update: {asked: gateway}}
        - {output: paid, update: {receipt: {id: r-1}}}
    signals: [{at: PT1M, key: k, payload: {gateway: ok}}]
    """
    played = await play_script(script(text), flow(CHARGE))
    assert dict(played.result.state) == {
        "order": 42,
        "asked": "gateway",
        "gateway": "ok",
        "receipt": {"id": "r-1"},
    }
    assert "charge runs again with the signal" in [t for _, t in said(played, "node_started")][1]


async def test_real_nodes_run_on_the_virtual_clock_keeping_their_settings() -> None:
    # think sleeps 30 s of its one-minute window (its implementation's default), then the run
    # waits three hours, then act runs in a worker thread: all in a moment.
    played = await play_script(script("{}"), flow(SLOW), registry=registry())
    assert said(played, "node_finished") == [
        (timedelta(seconds=30), "think returned 'done' → pause"),
        (timedelta(hours=3, seconds=30), "act returned 'done' → end"),
    ]
    assert played.result.state == {"acted": True}
    think, pause = played.windows
    assert (think.placement, think.source, think.ending) == (
        "think",
        "implementation default",
        "moved_on",
    )
    assert (pause.placement, pause.kind, pause.anchor, pause.ending) == (
        "pause",
        "wait",
        "arrival",
        "elapsed",
    )
    assert pause.duration == timedelta(hours=3)


async def test_time_waits_for_work_in_a_worker_thread() -> None:
    # The clock does not move while a sync node works in a thread: it ends in its window,
    # though the script's (unanswered) signal has the clock go on to +5:00.
    played = await play_script(
        script("signals: [{at: PT5M, key: k}]"), flow(CRUNCH), registry=registry()
    )
    assert played.result.outcome == "completed"
    assert said(played, "node_finished") == [(timedelta(0), "crunch returned 'done' → end")]


async def test_a_scripted_node_keeps_its_implementations_settings() -> None:
    played = await play_script(
        script("nodes: {think: [{after: PT2M, output: done}]}"), flow(SLOW), registry=registry()
    )
    assert said(played, "node_timed_out") == [
        (MINUTE, "think timed out: its window of PT1M ended at +1:00 → late")
    ]
    assert played.windows[0].source == "implementation default"


async def test_a_run_still_parked_when_the_clock_stops() -> None:
    played = await play_script(
        script("nodes: {charge: [{park: {key: k}}]}\nuntil: PT3M"), flow(CHARGE)
    )
    # The park's window (five minutes) is beyond 'until': the run is still parked.
    result = played.result
    assert (result.lifecycle, result.ended_at) == (Lifecycle.PARKED, None)
    assert played.since(result.stopped_at) == 3 * MINUTE
    (parked,) = result.parked
    assert (parked.placement, parked.key) == ("charge", "k")


async def test_a_subflows_park_signalled_by_its_key() -> None:
    text = """
    nodes: {approve: [{after: PT1M, park: {key: review-1}}]}
    signals: [{at: P1D, key: review-1, output: approved}]
    until: P2D
    """
    review = flow(REVIEW)
    played = await play_script(script(text), flow(PARENT, review), others=[review])
    child = [m for m in played.moments if m.run == "review"]
    assert (child[0].text, child[-1].text) == (
        "the run started",
        "the run ended: completed, outcome 'approved'",
    )
    assert played.signals[0].accepted
    assert played.result.outcome == "completed"
    assert played.result.lifecycle is Lifecycle.COMPLETED
    assert played.since(played.result.stopped_at) == timedelta(days=1)


async def test_the_script_is_checked_against_the_flows() -> None:
    text = """
    nodes: {charge: [{output: maybe}], nowhere: [{output: paid}], done: [{output: paid}]}
    signals: [{at: PT1M, placement: elsewhere}]
    """
    with pytest.raises(FlowValidationError) as raised:
        await play_script(script(text), flow(CHARGE), source="story.yaml")
    assert [(p.pointer, p.source) for p in raised.value.problems] == [
        ("/nodes/charge/0/output", "story.yaml"),
        ("/nodes/done", "story.yaml"),
        ("/nodes/nowhere", "story.yaml"),
        ("/signals/0/placement", "story.yaml"),
    ]
    messages = [p.message for p in raised.value.problems]
    assert messages[0] == (
        "the node at 'charge' does not declare output 'maybe' (it declares: paid, declined)"
    )
    assert messages[1] == "placement 'done' is a terminal: it runs no node"


async def test_the_timeline_as_json() -> None:
    text = """
    nodes: {charge: [{park: {key: k}}]}
    signals: [{at: PT6M, key: k, output: paid}]
    """
    data = json.loads(json.dumps((await play_script(script(text), flow(CHARGE))).to_dict()))
    assert set(data) == {"timeline", "windows", "result"}
    started, *_, signal = data["timeline"]
    assert started["kind"] == "run_started"
    assert started["at"] == "2026-01-01T09:00:00+00:00"
    assert (signal["kind"], signal["after_seconds"]) == ("signal", 360.0)
    assert signal["signal"]["reason"] == "expired"
    (window,) = data["windows"]
    assert (window["deadline_after_seconds"], window["anchor"]) == (300.0, "park")
    assert data["result"]["outcome"] == "late"
    assert data["result"]["ended_after_seconds"] == 300.0


async def test_a_run_that_never_rests_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flowtide.simulation.play.MAX_TIMERS", 5)
    steps = script("nodes: {check: [" + ", ".join(["{output: again}"] * 10) + "]}")
    played = await play_script(steps, flow(LOOP))
    result = played.result
    assert (result.busy, result.ended_at) == (True, None)
    assert played.since(result.stopped_at) == 5 * MINUTE
    assert [m.after for m in played.moments if m.kind == "node_finished"] == [
        n * MINUTE for n in range(1, 6)
    ]
