"""Playing a script: one run on a virtual clock, against an in-memory store, the script's signals
sent at their instants, and what happened told as a :class:`~flowtide.simulation.Timeline`.

::

    timeline = await play_script(load_script(Path("story.simulate.yaml")), flow, registry=nodes)
    for moment in timeline.moments:
        print(since(moment.after), moment.text)

The clock moves from timer to timer (a node's window, a wait, a backoff, an escalation timer, a
scripted node's ``after``), never faster than the work it waits on: a node running in a worker
thread is waited for before time moves on. It stops when the run has ended and every signal has
been sent, or at the script's ``until``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from flowtide.authoring.nodes import NodeImplementation, NodeRegistry
from flowtide.authoring.nodes import registry as default_registry
from flowtide.clock import VirtualClock
from flowtide.engine import (
    Engine,
    Explanation,
    Lifecycle,
    ParkedToken,
    RunHandle,
    SignalRefused,
    SubflowStarted,
    TimerFired,
    TokenCancelled,
    WaitStarted,
    payload_of,
)
from flowtide.model.flow import Flow
from flowtide.model.placements import Wait
from flowtide.model.settings import TimeoutAnchor
from flowtide.simulation.script import Script, ScriptedSignal, check_script
from flowtide.simulation.scripted import Resolve, ScriptedNodes
from flowtide.simulation.timeline import Result, SignalSent, Timeline, Window
from flowtide.simulation.words import Narrator
from flowtide.store import EventRecord, ParkStatus

__all__ = ["MAX_TIMERS", "play_script", "resolver"]

MAX_TIMERS = 10_000
"""How many timers the clock fires at most: a run that never rests (a loop of short waits) is
stopped there, its result marked ``busy``."""


def resolver(registry: NodeRegistry | None = None) -> Resolve:
    """Node id -> its implementation: in ``registry``, else the process-wide registry (None
    when neither has it: a placement the script plays needs none, and the engine says why any
    other cannot run). Nothing is imported because a flow names it."""

    def resolve(ref: str) -> NodeImplementation | None:
        found = registry.get(ref) if registry is not None else None
        if found is not None:
            return found
        try:
            return default_registry.resolve(ref)
        except Exception:  # not found, or a module that fails to import: no code to run here
            return None

    return resolve


def _no_code(ref: str) -> NodeImplementation | None:
    return None


async def play_script(
    script: Script,
    flow: Flow,
    *,
    others: Sequence[Flow] = (),
    registry: NodeRegistry | None = None,
    source: str | None = None,
    run_code: bool = True,
) -> Timeline:
    """Play ``script`` on ``flow`` (``others``: the flows its subflows and scatters run;
    ``registry``: the real node implementations; ``run_code=False``: no node code runs at all,
    a placement whose steps are used up fails with :class:`ScriptUsedUp`). Raises
    :class:`~flowtide.errors.FlowValidationError` when the script does not fit the flows
    (``source`` names the script in its problems)."""
    resolve = resolver(registry) if run_code else _no_code
    scripted = ScriptedNodes(script.nodes, [flow, *others], resolve)
    check_script(script, flow, others, scripted.outputs, source)
    clock = VirtualClock(script.start)
    recorder = _Recorder()
    engine = Engine(
        clock=clock,
        flows=[flow, *others],
        registry=scripted.registry(registry if run_code else None),
        hooks=[recorder],
        # A lease outlives the play: no renewal ticks on the clock.
        lease_ttl=3 * script.until + timedelta(days=1),
    )
    try:
        async with engine:
            handle = await engine.start(
                flow, script.input, deadline=script.deadline, run_id=script.run_id
            )
            stepper = _Stepper(clock)
            for index, signal in script.played():
                await stepper.to(script.start + signal.at)
                if stepper.busy:
                    break
                position = len(recorder.entries)
                sent = await _send(engine, handle.run_id, index, signal, clock.now())
                recorder.entries.insert(position, sent)
            await stepper.to(script.start + script.until, handle)
            return await _report(engine, flow, script.start, handle, recorder, stepper.busy)
    finally:
        await clock.aclose()


@dataclass
class _Recorder:
    """The engine's hook: every event, in the order the engine committed them (across runs),
    with the script's signals inserted where they were sent."""

    entries: list[EventRecord | SignalSent] = field(default_factory=list)
    seen: set[tuple[str, int]] = field(default_factory=set)

    def __call__(self, event: EventRecord) -> None:
        self.entries.append(event)
        self.seen.add((event.run_id, event.seq))


class _Stepper:
    """Moves the clock from timer to timer, waiting for held work (threads) at each."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.fired = 0
        self.busy = False

    async def to(self, target: datetime, handle: RunHandle | None = None) -> None:
        """Up to ``target``, or (given the run's ``handle``) until the run has ended."""
        while not self.busy:
            await self.clock.settle(wait_held=True)
            if handle is not None and handle.done:
                return
            due = self.clock.next_timer()
            if due is None or due > target:
                break
            await self.clock.advance_to(due)
            self.fired += 1
            self.busy = self.fired >= MAX_TIMERS
        if not self.busy:
            await self.clock.advance_to(target)
            await self.clock.settle(wait_held=True)


async def _send(
    engine: Engine, run_id: str, index: int, signal: ScriptedSignal, at: datetime
) -> SignalSent:
    """Send one signal (by placement: to the simulated run; by key alone: to whichever run
    parked with that key) and say how it was answered."""
    try:
        receipt = await engine.signal(
            run_id if signal.placement is not None else None,
            placement=signal.placement,
            key=signal.key,
            payload=signal.payload,
            output=signal.output,
        )
    except SignalRefused as refused:
        return SignalSent(
            index,
            at,
            signal.placement,
            signal.key,
            signal.payload,
            signal.output,
            accepted=False,
            reason=refused.reason.value,
            message=str(refused),
            closed_at=refused.at,
            token_id=refused.token_id,
        )
    return SignalSent(
        index,
        at,
        signal.placement,
        signal.key,
        signal.payload,
        signal.output,
        accepted=True,
        token_id=receipt.token_id,
        reached=receipt.placement,
    )


# -- the report ---------------------------------------------------------------------------------


async def _report(
    engine: Engine,
    flow: Flow,
    start: datetime,
    handle: RunHandle,
    recorder: _Recorder,
    busy: bool,
) -> Timeline:
    entries = await _complete(engine, handle.run_id, recorder)
    events = [e for e in entries if isinstance(e, EventRecord)]
    flows = {handle.run_id: flow.id}
    flows.update({e.run_id: str(e.data.get("flow")) for e in events if e.kind == "run_started"})

    def settings_at(run_id: str, placement: str) -> tuple[timedelta | None, TimeoutAnchor]:
        found = engine.plan(flows.get(run_id, flow.id)).settings.get(placement)
        return (found.timeout, found.anchor) if found is not None else (None, TimeoutAnchor.PARK)

    paths = _paths(events)
    narrator = Narrator(
        start,
        lambda run_id, p: settings_at(run_id, p)[0],
        lambda run_id, p: settings_at(run_id, p)[1],
        paths,
    )
    moments = tuple(
        narrator.event(e) if isinstance(e, EventRecord) else narrator.signal(e) for e in entries
    )
    runs = list(dict.fromkeys([handle.run_id, *(e.run_id for e in events)]))
    windows: list[tuple[int, datetime, Window]] = []
    for order, run_id in enumerate(runs):
        path = paths.get(run_id)
        explained = [_window(x, path) for x in await engine.explain_run(run_id)]
        waits = _waits(engine, flows.get(run_id, flow.id), run_id, events, path)
        windows.extend((order, w.anchor_at or start, w) for w in [*explained, *waits])
    windows.sort(key=lambda w: (w[0], w[1]))
    result = await _result(engine, handle, events, start, busy)
    return Timeline(flow.id, start, moments, tuple(w for _, _, w in windows), result)


async def _complete(
    engine: Engine, run_id: str, recorder: _Recorder
) -> list[EventRecord | SignalSent]:
    """What the hook saw, completed from the stored histories (a ``hook_failed`` event is not
    passed to hooks), in the order things happened."""
    entries = list(recorder.entries)
    runs = dict.fromkeys([run_id, *(e.run_id for e in entries if isinstance(e, EventRecord))])
    for each in runs:
        entries.extend(
            e for e in await engine.history(each) if (e.run_id, e.seq) not in recorder.seen
        )
    return sorted(entries, key=lambda e: e.at)


def _paths(events: Sequence[EventRecord]) -> dict[str, str]:
    """Child run id -> the subflow placements leading to it (``review``, ``items[2]``)."""
    started = [
        (e.run_id, e.placement or "?", payload_of(e, SubflowStarted).child)
        for e in events
        if e.kind == "subflow_started"
    ]
    counts: dict[tuple[str, str], int] = {}
    for parent, placement, _ in started:
        counts[parent, placement] = counts.get((parent, placement), 0) + 1
    paths: dict[str, str] = {}
    seen: dict[tuple[str, str], int] = {}
    for parent, placement, child in started:
        name = placement
        if counts[parent, placement] > 1:
            seen[parent, placement] = seen.get((parent, placement), 0) + 1
            name = f"{placement}[{seen[parent, placement]}]"
        above = paths.get(parent)
        paths[child] = f"{above} > {name}" if above else name
    return paths


def _window(x: Explanation, path: str | None) -> Window:
    return Window(
        placement=x.placement,
        kind="timeout" if x.timeout is not None else "timers",
        deadline=x.deadline,
        duration=x.timeout,
        anchor=x.anchor.value,
        anchor_at=x.anchor_at,
        source=x.timeout_source,
        anchor_source=x.anchor_source,
        visit=x.visit,
        anchor_visit=x.anchor_visit,
        ending=x.ending,
        ended_at=x.ended_at,
        ended_by=x.ended_by,
        run=path,
        timers=x.timers,
    )


def _waits(
    engine: Engine, flow_id: str, run_id: str, events: Sequence[EventRecord], path: str | None
) -> list[Window]:
    """The last wait at each wait placement of the run, from its events."""
    plan = engine.plan(flow_id)
    found: dict[str, Window] = {}
    for e in events:
        if e.run_id != run_id or e.placement is None:
            continue
        placement = plan.placements.get(e.placement)
        if not isinstance(placement, Wait):
            continue
        payload = payload_of(e)
        if isinstance(payload, WaitStarted):
            found.pop(e.placement, None)
            found[e.placement] = Window(
                placement=e.placement,
                kind="wait",
                deadline=datetime.fromisoformat(payload.due),
                duration=placement.duration,
                anchor="arrival",
                anchor_at=e.at,
                source="placement",
                anchor_source=None,
                run=path,
            )
        elif e.placement in found and found[e.placement].ending is None:
            last = found[e.placement]
            if isinstance(payload, TimerFired):
                found[e.placement] = replace(
                    last, ending="elapsed", ended_at=e.at, ended_by=payload.output
                )
            elif isinstance(payload, TokenCancelled):
                found[e.placement] = replace(
                    last, ending="cancelled", ended_at=e.at, ended_by=payload.reason
                )
    return list(found.values())


async def _result(
    engine: Engine,
    handle: RunHandle,
    events: Sequence[EventRecord],
    start: datetime,
    busy: bool,
) -> Result:
    run_id = handle.run_id
    mine = [e for e in events if e.run_id == run_id]
    terminals = tuple(e.placement or "" for e in mine if e.kind == "terminal_reached")
    stopped = engine.clock.now()
    if handle.done:
        ended = await handle.result()
        finished = [e.at for e in mine if e.kind == "run_finished"]
        return Result(
            run_id,
            ended.lifecycle,
            ended.outcome,
            ended.state,
            start,
            stopped,
            ended_at=finished[-1] if finished else stopped,
            errors=ended.errors,
            terminals=ended.terminals or terminals,
            busy=busy,
        )
    record = await engine.store.get_run(run_id)
    parked = tuple(
        ParkedToken(p.token_id, p.placement, p.key, p.deadline, p.payload, p.parked_at)
        for p in await engine.parks(run_id)
        if p.status == ParkStatus.PARKED
    )
    return Result(
        run_id,
        Lifecycle(record.lifecycle),
        record.outcome,
        await engine.store.get_state(run_id),
        start,
        stopped,
        parked=parked,
        terminals=terminals,
        busy=busy,
    )
