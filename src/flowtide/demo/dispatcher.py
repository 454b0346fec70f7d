"""The support dispatcher, runnable: stand-ins for its nodes, under the document's node IRIs.

The "model calls" are simulated: each takes ``state["modelLatency"]`` seconds (default 0.8) on
the engine's clock. The demo runs on a virtual clock in autojump mode, so a 90-second model call
that exceeds classify-message's 60-second window is shown in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.engine import Engine, Lifecycle, NodeContext, Output, RunResult
from flowtide.store import EventRecord

_PATH_EVENTS = frozenset(
    {"node_finished", "node_timed_out", "node_failed", "parked", "terminal_reached"}
)

ESCALATE_WORDS = ("refund", "human", "agent", "complaint", "lawyer", "cancel my")
OFF_TOPIC_WORDS = ("weather", "joke", "poem", "football")


async def _model_call(ctx: NodeContext) -> None:
    latency = float(ctx.state.get("modelLatency", 0.8))
    await ctx.clock.sleep(timedelta(seconds=latency))


@node(id="urn:noocodec:node:dispatcher-setup", outputs=["ready"], register=False)
async def dispatcher_setup(ctx: NodeContext) -> str:
    """Stamps the run before the entrypoint runs."""
    ctx.state["runId"] = ctx.run_id
    ctx.state.setdefault("conversation", [])
    return "ready"


@node(
    id="urn:noocodec:node:classify-message",
    outputs=["routine", "escalate", "off-topic"],
    timeout="PT60S",
    register=False,
)
async def classify_message(ctx: NodeContext) -> str:
    """Routes the message: routine, escalate (a human is needed) or off-topic."""
    message = str(ctx.state.get("message", "")).strip()
    if ctx.state.get("humanMode"):
        ctx.state["escalationReason"] = "Human mode active: all messages go to an operator"
        return "escalate"
    if not message:
        return "off-topic"
    await _model_call(ctx)
    lowered = message.lower()
    if any(w in lowered for w in ESCALATE_WORDS):
        ctx.state["escalationReason"] = "The message needs a human"
        return "escalate"
    if any(w in lowered for w in OFF_TOPIC_WORDS):
        return "off-topic"
    return "routine"


@node(id="urn:noocodec:node:ai-compose", outputs=["drafted"], timeout="PT60S", register=False)
async def ai_compose(ctx: NodeContext) -> Output:
    """Drafts a reply (a simulated model call)."""
    await _model_call(ctx)
    reply = f"Thanks for your message! About {ctx.state.get('message', '')!r}: we are on it."
    return Output("drafted", update={"response": reply})


@node(id="urn:noocodec:node:park-for-operator", outputs=["parked", "ready"], register=False)
async def park_for_operator(ctx: NodeContext) -> str:
    """Hands the conversation to an operator: parks until the operator's reply is signalled,
    then runs again and routes ``ready`` with that reply."""
    if ctx.state.get("operatorReply"):
        ctx.state["response"] = ctx.state["operatorReply"]
        return "ready"
    ctx.state["handedOver"] = True
    return "parked"


@node(id="urn:noocodec:node:send-response", outputs=["sent"], execution="inline", register=False)
def send_response(ctx: NodeContext) -> str:
    """Sends the reply (appends it to the conversation)."""
    ctx.state["conversation"] = [*ctx.state.get("conversation", []), ctx.state.get("response")]
    ctx.state["sent"] = True
    return "sent"


@node(id="urn:noocodec:node:decline", outputs=["declined"], execution="inline", register=False)
def decline(ctx: NodeContext) -> str:
    """Politely declines an off-topic or empty message."""
    ctx.state["response"] = "Sorry, I can only help with questions about your orders."
    return "declined"


NODES = (dispatcher_setup, classify_message, ai_compose, park_for_operator, send_response, decline)


def dispatcher_registry(registry: NodeRegistry | None = None) -> NodeRegistry:
    """A registry holding the dispatcher's stand-in nodes (added to ``registry`` if given)."""
    target = registry if registry is not None else NodeRegistry()
    for impl in NODES:
        target.register(impl)
    return target


@dataclass(frozen=True)
class DemoCase:
    title: str
    input: dict[str, Any]
    operator_reply: str | None = None
    """If the run parks for an operator, the reply signalled after ``operator_delay``."""
    operator_delay: timedelta = timedelta(minutes=5)


DEMO_MESSAGES: tuple[DemoCase, ...] = (
    DemoCase("a routine question", {"message": "Where is my order #1234?"}),
    DemoCase(
        "a customer who wants a human",
        {"message": "I want a refund, get me a human"},
        operator_reply="Hello, this is Sam from support: your refund is on its way.",
    ),
    DemoCase("an empty message", {"message": "   "}),
    DemoCase(
        "a model call slower than its 60 s window",
        {"message": "Where is my parcel?", "modelLatency": 90},
    ),
)


@dataclass(frozen=True)
class DemoRun:
    case: DemoCase
    result: RunResult
    path: tuple[str, ...]
    elapsed: timedelta
    history: Sequence[EventRecord]
    parked: RunResult | None = None
    """The run as it was when it parked for an operator, if it did."""


def dispatcher_document() -> Path:
    """The bundled support-dispatcher example with its per-node timeouts."""
    from flowtide.cli.examples import examples_dir

    folder = examples_dir()
    if folder is None:
        raise FileNotFoundError("this installation has no bundled examples")
    return folder / "support-dispatcher-timeouts.jsonld"


async def run_dispatcher_demo(
    cases: Sequence[DemoCase] = DEMO_MESSAGES, document: Path | None = None
) -> list[DemoRun]:
    """Load the example, run every case on a virtual clock, and report each run."""
    from flowtide.documents import load_flow

    registry = dispatcher_registry()
    flow = load_flow(document or dispatcher_document(), registry=registry)
    clock = VirtualClock(autojump=True)
    runs: list[DemoRun] = []
    async with Engine(clock=clock, registry=registry, flows=[flow]) as engine:
        for case in cases:
            started = clock.now()
            result = await engine.run(flow, case.input)
            parked = None
            if result.lifecycle is Lifecycle.PARKED and case.operator_reply is not None:
                # The run let go of its worker; the operator answers minutes later.
                parked = result
                await clock.sleep(case.operator_delay)
                await engine.signal(
                    result.run_id,
                    placement=result.parked[0].placement,
                    payload={"operatorReply": case.operator_reply},
                )
                result = await engine.wait(result.run_id)
            history = await engine.history(result.run_id)
            path = tuple(
                e.placement for e in history if e.kind in _PATH_EVENTS and e.placement is not None
            )
            runs.append(DemoRun(case, result, path, clock.now() - started, history, parked))
    await clock.aclose()
    return runs
