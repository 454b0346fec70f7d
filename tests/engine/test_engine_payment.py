"""The payment case both ways: a node anchor, and a wait branch with a first join.

The same scripted events drive both example flows under the virtual clock: the gateway declines
at minutes 2, 5 and 9 (the customer retries right after the first two), the customer retries at
9:30, the gateway answers "paid" at 10:30. Both expire at 10:00; with ``timeout_anchor: park``
the payment succeeds at 10:30 instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide.clock import VirtualClock
from flowtide.demo.checkout import SCRIPT, checkout_registry
from flowtide.documents import load_flow
from flowtide.engine import Engine, Lifecycle, RefusalReason, SignalRefused
from flowtide.model import Flow
from tests.engine.engine_helpers import T0, at, of_kind

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str, *, anchor: str | None = None) -> Flow:
    text = (EXAMPLES / name).read_text()
    if anchor is not None:
        text = text.replace("timeout_anchor: node", f"timeout_anchor: {anchor}")
    return load_flow(text, format="yaml", registry=checkout_registry())


NODE_ANCHOR = "checkout-node-anchor.yaml"
WAIT_BRANCH = "checkout-wait-branch.yaml"


async def play(
    flow: Flow, script: Sequence[tuple[float, str, dict[str, Any]]] = SCRIPT
) -> tuple[Engine, VirtualClock, str, list[tuple[float, str, Any]]]:
    """Run ``flow`` and play ``script``; returns what each signal got (receipt or refusal)."""
    clock = VirtualClock(T0)
    engine = Engine(clock=clock, registry=checkout_registry())
    first = await engine.run(flow)
    assert first.lifecycle is Lifecycle.PARKED
    answers: list[tuple[float, str, Any]] = []
    for minute, placement, payload in script:
        await clock.advance_to(at(minute * 60))
        try:
            receipt = await engine.signal(first.run_id, placement=placement, payload=payload)
            answers.append((minute, placement, receipt.output))
        except SignalRefused as exc:
            answers.append((minute, placement, exc.reason))
        await clock.settle()
    return engine, clock, first.run_id, answers


async def finish(engine: Engine, clock: VirtualClock, run_id: str) -> Any:
    await clock.advance(timedelta(hours=1))
    result = await engine.wait(run_id)
    await engine.close()
    return result


def finished_at(history: Sequence[Any]) -> Any:
    (end,) = of_kind(history, "run_finished")
    return end.at


@pytest.mark.parametrize("name", [NODE_ANCHOR, WAIT_BRANCH])
async def test_both_models_expire_at_ten_minutes_whatever_the_retries(name: str) -> None:
    engine, clock, run_id, answers = await play(example(name))
    history = await engine.history(run_id)
    result = await finish(engine, clock, run_id)
    assert result.lifecycle is Lifecycle.COMPLETED
    assert result.outcome == "expired"
    assert finished_at(history) == at(600)
    # Every signal before 10:00 was taken; the gateway's "paid" at 10:30 came too late.
    assert [a[2] for a in answers[:-1]] == [None] * 6
    late = answers[-1][2]
    expected = RefusalReason.EXPIRED if name == NODE_ANCHOR else RefusalReason.CANCELLED
    assert late is expected
    assert result.state["tries"] == 4


async def test_the_two_models_agree() -> None:
    outcomes = []
    for name in (NODE_ANCHOR, WAIT_BRANCH):
        engine, clock, run_id, _ = await play(example(name))
        history = await engine.history(run_id)
        result = await finish(engine, clock, run_id)
        outcomes.append((result.outcome, finished_at(history)))
    assert outcomes[0] == outcomes[1] == ("expired", at(600))


async def test_with_a_park_anchor_every_retry_gets_ten_fresh_minutes_and_pays() -> None:
    engine, clock, run_id, answers = await play(example(NODE_ANCHOR, anchor="park"))
    history = await engine.history(run_id)
    result = await finish(engine, clock, run_id)
    assert [a[2] for a in answers] == [None] * 7
    assert result.outcome == "paid"
    assert finished_at(history) == at(630)


async def test_the_node_anchor_is_stored_once_and_reused_on_every_try() -> None:
    engine, clock, run_id, _ = await play(example(NODE_ANCHOR), SCRIPT[:-1])
    parked = [e for e in await engine.history(run_id) if e.kind == "parked"]
    deadlines = {e.data["deadline"] for e in parked if e.placement == "collect-payment"}
    assert deadlines == {at(600).isoformat()}
    anchors = await engine.store.node_anchors(run_id)
    assert [(a.placement, a.at) for a in anchors] == [("collect-payment", at(0))]
    explained = await engine.explain(run_id, placement="collect-payment")
    assert (explained.anchor.value, explained.anchor_at, explained.deadline) == (
        "node",
        at(0),
        at(600),
    )
    assert explained.timeout_source == "placement"
    assert "anchor node" in str(explained)
    await finish(engine, clock, run_id)
    assert await engine.store.node_anchors(run_id) == []  # released when the run ended


async def test_a_late_gateway_callback_after_expiry_is_refused_and_changes_nothing() -> None:
    engine, clock, run_id, _ = await play(example(NODE_ANCHOR), SCRIPT[:-1])
    await clock.advance_to(at(610))
    before = (
        (await engine.store.get_run(run_id)).lifecycle,
        await engine.store.get_state(run_id),
        list(await engine.history(run_id)),
    )
    with pytest.raises(SignalRefused) as info:
        await engine.signal(key=f"charge-{run_id}-4", payload={"gateway": "paid"})
    assert info.value.reason is RefusalReason.EXPIRED
    assert info.value.at == at(600)
    assert str(info.value).endswith("expired at 00:10:00Z, 10 s before this signal")
    after = (
        (await engine.store.get_run(run_id)).lifecycle,
        await engine.store.get_state(run_id),
        list(await engine.history(run_id)),
    )
    assert after == before
    await finish(engine, clock, run_id)


async def test_a_retry_after_expiry_times_out_at_once_without_running_the_node() -> None:
    # The window ends while the customer is still deciding at offer-retry (declined at 9:00).
    script = [*SCRIPT[:5], (11, "offer-retry", {"choice": "retry"})]
    engine, clock, run_id, answers = await play(example(NODE_ANCHOR), script)
    history = await engine.history(run_id)
    result = await finish(engine, clock, run_id)
    assert answers[-1][2] is None  # the customer's retry was taken...
    assert result.outcome == "expired"  # ...and expired on arrival at collect-payment
    assert finished_at(history) == at(660)
    last = [e for e in history if e.placement == "collect-payment"][-1]
    assert (last.kind, last.at) == ("node_timed_out", at(660))
    assert result.state["tries"] == 3  # the fourth try never ran the node


async def test_the_wait_branch_model_expires_at_once_while_the_customer_decides() -> None:
    script = [*SCRIPT[:5], (11, "offer-retry", {"choice": "retry"})]
    engine, clock, run_id, answers = await play(example(WAIT_BRANCH), script)
    history = await engine.history(run_id)
    result = await finish(engine, clock, run_id)
    assert answers[-1][2] is RefusalReason.CANCELLED  # the join cancelled offer-retry at 10:00
    assert result.outcome == "expired"
    assert finished_at(history) == at(600)


# -- explain, once the run has ended ---------------------------------------------------------------


async def test_explain_after_the_payment_expired_says_when_and_from_which_anchor() -> None:
    engine, clock, run_id, _ = await play(example(NODE_ANCHOR), SCRIPT[:-1])
    await clock.advance(timedelta(hours=1))
    result = await engine.wait(run_id)
    assert result.outcome == "expired"
    history = await engine.history(run_id)
    explained = await engine.explain(run_id, placement="collect-payment")
    everything = await engine.explain_run(run_id)
    await engine.close()
    first_try = next(e for e in history if e.placement == "collect-payment")
    assert (first_try.kind, first_try.at) == ("node_started", at(0))
    # The last of the four tries: the window is the first try's ten minutes, and it ran out.
    assert explained.visit == 4
    assert (explained.anchor.value, explained.anchor_at, explained.anchor_visit) == (
        "node",
        at(0),
        1,
    )
    assert (explained.timeout, explained.deadline) == (timedelta(minutes=10), at(600))
    assert (explained.timeout_source, explained.anchor_source) == ("placement", "placement")
    assert (explained.ending, explained.ended_at, explained.ended_by) == (
        "timed_out",
        at(600),
        "timeout",
    )
    assert explained.resolved_at == at(9.5 * 60)  # the last park, after the retry at 9:30
    text = str(explained)
    assert "deadline 2026-01-01T00:10:00+00:00" in text
    assert (
        "anchor node (the first arrival at the placement: 2026-01-01T00:00:00+00:00, visit 1)"
        in (text)
    )
    assert "timed out at 2026-01-01T00:10:00+00:00, by its 'timeout' route" in text
    # Only collect-payment had a window.
    assert everything == [explained]


async def test_explain_after_a_park_anchored_payment_paid_says_it_moved_on() -> None:
    engine, clock, run_id, _ = await play(example(NODE_ANCHOR, anchor="park"))
    await clock.advance(timedelta(hours=1))
    assert (await engine.wait(run_id)).outcome == "paid"
    explained = await engine.explain(run_id, placement="collect-payment")
    await engine.close()
    # The gateway's callback at 10:30 ran the node again: with a park anchor, that attempt
    # started ten fresh minutes.
    assert (explained.anchor.value, explained.anchor_at, explained.deadline) == (
        "park",
        at(10.5 * 60),
        at(20.5 * 60),
    )
    assert (explained.ending, explained.ended_at, explained.ended_by) == (
        "moved_on",
        at(10.5 * 60),
        "paid",
    )
    assert "moved on at 2026-01-01T00:10:30+00:00 by output 'paid'" in str(explained)


async def test_explain_after_a_cancel_says_the_payment_was_cancelled() -> None:
    engine, clock, run_id, _ = await play(example(NODE_ANCHOR), SCRIPT[:2])
    await clock.advance_to(at(3 * 60))
    assert await engine.cancel(run_id, "the customer left")
    assert (await engine.wait(run_id)).lifecycle is Lifecycle.CANCELLED
    explained = await engine.explain(run_id, placement="collect-payment")
    await engine.close()
    assert (explained.visit, explained.anchor_at, explained.deadline) == (2, at(0), at(600))
    assert (explained.ending, explained.ended_at) == ("cancelled", at(3 * 60))
