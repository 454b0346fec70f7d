"""The escalation ladder, runnable: stand-ins for the approval nodes and a silent approver.

``examples/escalation-ladder.yaml`` names its nodes by IRI; :data:`NODES` implements them, so
``flowtide run examples/escalation-ladder.yaml --nodes flowtide.demo.approval`` runs it.
:func:`run_approval_demo` plays it on a virtual clock: nobody answers, so a reminder goes out
after each hour of waiting, the request climbs a level every four hours, the whole request
expires twelve hours after it was first made, and an approval that comes half an hour later is
refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.demo.timing import since
from flowtide.engine import Engine, NodeContext, Park, RunResult, SignalRefused
from flowtide.store import EventRecord

NODE = "urn:flowtide:example:node:"
START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
LEVELS = ("the team lead", "the department head", "the director")
"""Who is asked, level by level."""


def approver(state: dict[str, Any]) -> str:
    """Who the request is with now."""
    return LEVELS[min(int(state.get("level", 0)), len(LEVELS) - 1)]


@node(id=NODE + "await-approval", outputs=["approved", "rejected"], parks=True, register=False)
async def await_approval(ctx: NodeContext) -> Any:
    """Asks the current approver and parks; the decision is signalled as ``{"approved": bool}``."""
    if ctx.signal is None:
        return Park(key=f"approval-{ctx.run_id}", payload={"approver": approver(ctx.state)})
    ctx.state["decided_by"] = approver(ctx.state)
    return "approved" if ctx.signal.get("approved") else "rejected"


@node(id=NODE + "send-reminder", outputs=["sent"], register=False)
async def send_reminder(ctx: NodeContext) -> str:
    """Reminds the current approver (here: notes it in the state's ``reminders``)."""
    ctx.state["reminders"] = [*ctx.state.get("reminders", []), approver(ctx.state)]
    return "sent"


@node(id=NODE + "escalate", outputs=["escalated", "top-reached"], register=False)
async def escalate(ctx: NodeContext) -> str:
    """Hands the request to the next level, or routes ``top-reached`` when there is none."""
    level = int(ctx.state.get("level", 0))
    if level + 1 >= len(LEVELS):
        return "top-reached"
    ctx.state["level"] = level + 1
    return "escalated"


NODES = (await_approval, send_reminder, escalate)


def approval_registry(registry: NodeRegistry | None = None) -> NodeRegistry:
    """A registry holding the approval's stand-in nodes (added to ``registry`` if given)."""
    target = registry if registry is not None else NodeRegistry()
    for impl in NODES:
        target.register(impl)
    return target


@dataclass(frozen=True)
class Moment:
    """One line of a run's timeline: how long after the start, and what happened."""

    after: timedelta
    what: str


@dataclass(frozen=True)
class ApprovalRun:
    result: RunResult
    timeline: tuple[Moment, ...]
    late: SignalRefused
    """The answer to the approval that came after the request expired."""


LATE_APPROVAL = timedelta(hours=12, minutes=30)


async def run_approval_demo(document: Path | None = None) -> ApprovalRun:
    """Play the bundled escalation ladder with a silent approver, then approve too late."""
    from flowtide.documents import load_flow

    if document is None:
        from flowtide.cli.examples import examples_dir

        folder = examples_dir()
        if folder is None:
            raise FileNotFoundError("this installation has no bundled examples")
        document = folder / "escalation-ladder.yaml"
    registry = approval_registry()
    flow = load_flow(document, registry=registry)
    clock = VirtualClock(START)
    async with Engine(clock=clock, registry=registry, flows=[flow]) as engine:
        run_id = (await engine.run(flow)).run_id
        await clock.advance_to(START + LATE_APPROVAL)
        result = await engine.wait(run_id)
        try:
            await engine.signal(run_id, placement="await-approval", payload={"approved": True})
        except SignalRefused as refused:
            late = refused
        else:  # pragma: no cover - the window is over: the engine refuses
            raise AssertionError("a late approval was taken")
        history = await engine.history(run_id)
    await clock.aclose()
    timeline = [*_timeline(history), _late(late)]
    return ApprovalRun(result, tuple(timeline), late)


def _timeline(history: Sequence[EventRecord]) -> list[Moment]:
    moments: list[Moment] = []
    level = 0
    for e in history:
        after = e.at - START
        if e.kind == "run_started":
            moments.append(Moment(after, f"the request is made: await-approval asks {LEVELS[0]}"))
        elif e.kind == "timer_fired" and e.data.get("output") == "remind":
            moments.append(Moment(after, f"a reminder to {LEVELS[level]}; the request waits on"))
        elif e.kind == "timer_fired" and e.data.get("output") == "escalate":
            level = min(level + 1, len(LEVELS) - 1)
            moments.append(Moment(after, f"four hours without an answer: on to {LEVELS[level]}"))
        elif e.kind == "node_timed_out" and e.placement == "await-approval":
            moments.append(Moment(after, "twelve hours since the request was made: expired"))
    return moments


def _late(refused: SignalRefused) -> Moment:
    when = f" at {since(refused.at - START, hours=True)}" if refused.at is not None else ""
    return Moment(LATE_APPROVAL, f"an approval comes: refused, the request {refused.reason}{when}")
