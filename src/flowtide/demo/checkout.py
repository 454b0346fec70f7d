"""The payment window, runnable: stand-ins for the checkout nodes and a scripted customer.

Both checkout examples give a payment ten minutes in all, whatever the number of retries: one
with a ``node`` timeout anchor on collect-payment, one with a parallel ``wait PT10M`` branch
raced into a ``first`` join. :func:`run_checkout_demo` plays the same script on each (and on the
anchor model switched to ``park``, where every retry gets ten fresh minutes) on a virtual clock:
the gateway declines at +2:00, +5:00 and +9:00 (minutes after the run started), the customer
retries after each decline (the last time at +9:30), and the gateway's "paid" arrives at +10:30.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, NodeContext, Park, RunResult, SignalRefused

NODE = "urn:flowtide:example:node:"
START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


@node(id=NODE + "open-payment", outputs=["opened"], register=False)
async def open_payment(ctx: NodeContext) -> str:
    """Creates the payment intent; its one output starts both branches."""
    ctx.state["opened_at"] = ctx.now().isoformat()
    return "opened"


@node(id=NODE + "collect-payment", outputs=["paid", "declined"], parks=True, register=False)
async def collect_payment(ctx: NodeContext) -> Any:
    """Asks the gateway to charge and parks; the gateway's callback wakes it to decide."""
    if ctx.signal is None:
        tries = ctx.state.get("tries", 0) + 1
        ctx.state["tries"] = tries
        return Park(key=f"charge-{ctx.run_id}-{tries}", payload={"try": tries})
    if ctx.signal.get("gateway") == "paid":
        ctx.state["payment_status"] = "paid"
        return "paid"
    return "declined"


@node(id=NODE + "offer-retry", outputs=["retry", "give-up"], parks=True, register=False)
async def offer_retry(ctx: NodeContext) -> Any:
    """Shows the decline and parks until the customer retries or gives up."""
    if ctx.signal is None:
        return Park(key=f"customer-{ctx.run_id}")
    if ctx.signal.get("choice") == "retry":
        return "retry"
    ctx.state["payment_status"] = "abandoned"
    return "give-up"


@node(id=NODE + "settle-payment", outputs=["paid", "expired", "abandoned"], register=False)
async def settle_payment(ctx: NodeContext) -> str:
    """After the race: paid, abandoned, or (nothing set: the wait won) expired."""
    status = ctx.state.get("payment_status")
    return status if status in ("paid", "abandoned") else "expired"


NODES = (open_payment, collect_payment, offer_retry, settle_payment)


def checkout_registry(registry: NodeRegistry | None = None) -> NodeRegistry:
    """A registry holding the checkout's stand-in nodes (added to ``registry`` if given)."""
    target = registry if registry is not None else NodeRegistry()
    for impl in NODES:
        target.register(impl)
    return target


Step = tuple[float, str, dict[str, Any]]
"""(minute, placement, payload) of one signal."""

SCRIPT: tuple[Step, ...] = (
    (2, "collect-payment", {"gateway": "declined"}),
    (2, "offer-retry", {"choice": "retry"}),
    (5, "collect-payment", {"gateway": "declined"}),
    (5, "offer-retry", {"choice": "retry"}),
    (9, "collect-payment", {"gateway": "declined"}),
    (9.5, "offer-retry", {"choice": "retry"}),
    (10.5, "collect-payment", {"gateway": "paid"}),
)


@dataclass(frozen=True)
class Answer:
    minute: float
    placement: str
    refused: SignalRefused | None
    """Why the signal was refused, or None if it was taken."""


@dataclass(frozen=True)
class CheckoutRun:
    model: str
    result: RunResult
    ended_at: datetime | None
    answers: tuple[Answer, ...]

    @property
    def ended_after(self) -> timedelta | None:
        return self.ended_at - START if self.ended_at is not None else None


MODELS: tuple[tuple[str, str, str | None], ...] = (
    ("node anchor", "checkout-node-anchor.yaml", None),
    ("park anchor", "checkout-node-anchor.yaml", "park"),
    ("wait branch + first join", "checkout-wait-branch.yaml", None),
)
"""(title, example file, anchor to switch collect-payment to)."""


async def play(
    document: Path,
    *,
    model: str = "",
    anchor: str | None = None,
    script: Sequence[Step] = SCRIPT,
) -> CheckoutRun:
    """Run one checkout example on a virtual clock and play ``script`` against it."""
    from flowtide.documents import load_flow

    text = await asyncio.to_thread(document.read_text, encoding="utf-8")
    if anchor is not None:
        text = text.replace("timeout_anchor: node", f"timeout_anchor: {anchor}")
    registry = checkout_registry()
    flow = load_flow(text, format="yaml", registry=registry)
    clock = VirtualClock(START)
    answers: list[Answer] = []
    async with Engine(clock=clock, registry=registry, flows=[flow]) as engine:
        run_id = (await engine.run(flow)).run_id
        for minute, placement, payload in script:
            await clock.advance_to(START + timedelta(minutes=minute))
            try:
                await engine.signal(run_id, placement=placement, payload=payload)
                answers.append(Answer(minute, placement, None))
            except SignalRefused as refused:
                answers.append(Answer(minute, placement, refused))
            await clock.settle()
        await clock.advance(timedelta(hours=1))
        result = await engine.wait(run_id)
        ended = [e.at for e in await engine.history(run_id) if e.kind == "run_finished"]
    await clock.aclose()
    return CheckoutRun(model, result, ended[-1] if ended else None, tuple(answers))


async def run_checkout_demo(folder: Path | None = None) -> list[CheckoutRun]:
    """Every model of :data:`MODELS`, played with the same script."""
    from flowtide.cli.examples import examples_dir

    where = folder or examples_dir()
    if where is None:
        raise FileNotFoundError("this installation has no bundled examples")
    return [await play(where / name, model=title, anchor=anchor) for title, name, anchor in MODELS]
