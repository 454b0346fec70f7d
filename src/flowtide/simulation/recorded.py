"""A recorded run turned into a :class:`~flowtide.simulation.Script`: what the outside world and
the run's nodes did, at the instants they did it, so that it can be played again on a virtual
clock under other settings.

From the history: each node attempt's outcome (the output it returned, its park and park key, or
its failure) and how long it took; each accepted signal at its instant since the run started,
with its output; the run's deadline. What the history does not keep is taken as near as the
store has it: the run's input is its last stored state (which holds the input's keys), a
signal's payload is the values its keys hold there. A signal that was refused is not in the
history, so it is not sent again.

An attempt that ran past its deadline never said what it would have done: it is played as an
attempt that keeps running for :data:`NEVER_ANSWERED` and then fails, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowtide.model.flow import Flow, node_ref
from flowtide.model.placements import Phase, Task
from flowtide.simulation.script import (
    DEFAULT_UNTIL,
    NodeStep,
    ParkStep,
    Script,
    ScriptedSignal,
)
from flowtide.store import EventRecord, RunRecord

__all__ = ["NEVER_ANSWERED", "NotReplayable", "RecordedEnd", "recorded_end", "script_of_run"]

NEVER_ANSWERED = timedelta(days=365)
"""How long an attempt that timed out while running keeps running when played again."""

UNKNOWN_LATER = "the recorded attempt ran past its deadline: what it would have done is not known"

_NOT_REPLAYED = {
    "subflow_started": "it ran a subflow (child runs are not played again)",
    "scatter_item_finished": "it ran a scatter (scatter items are not played again)",
}


class NotReplayable(Exception):
    """A recorded run that cannot be played again; the message says why."""


@dataclass(frozen=True, slots=True)
class RecordedEnd:
    """How a recorded run ended: its lifecycle, outcome, and when (since it started)."""

    lifecycle: str
    outcome: str | None
    after: timedelta

    def words(self) -> str:
        outcome = f" {self.outcome!r}" if self.outcome else ""
        return f"{self.lifecycle}{outcome} after {_since(self.after)}"


def _since(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def recorded_end(events: Sequence[EventRecord]) -> RecordedEnd:
    """The end of a run from its history (raises :class:`NotReplayable` if it has none)."""
    started = _started(events)
    finished = [e for e in events if e.kind == "run_finished"]
    if not finished:
        raise NotReplayable("it has not ended")
    last = finished[-1]
    outcome = last.data.get("outcome")
    return RecordedEnd(
        str(last.data.get("lifecycle")),
        outcome if isinstance(outcome, str) else None,
        last.at - started,
    )


def _started(events: Sequence[EventRecord]) -> datetime:
    for e in events:
        if e.kind == "run_started":
            return e.at
    raise NotReplayable("its history has no start")


def script_of_run(
    run: RunRecord, events: Sequence[EventRecord], state: Mapping[str, Any], flow: Flow
) -> Script:
    """The script that plays ``run`` again as it was recorded (``events``: its history;
    ``state``: its last stored state; ``flow``: the flow it ran). Raises
    :class:`NotReplayable` for a run whose story the history cannot tell (it ran subflows or
    scatters, or was cancelled)."""
    mine = sorted((e for e in events if e.run_id == run.id), key=lambda e: e.seq)
    start = _started(mine)
    end = recorded_end(mine)
    entrypoint = run.options.get("entrypoint")
    if entrypoint is not None and flow.entrypoints.get(entrypoint) != flow.main_entrypoint:
        raise NotReplayable(f"it started at entrypoint {entrypoint!r} (only 'main' is played)")
    if end.lifecycle == "cancelled":
        raise NotReplayable("it was cancelled (a cancel is not played again)")
    for e in mine:
        why = _NOT_REPLAYED.get(e.kind)
        if why:
            raise NotReplayable(why)
    steps = _steps(mine, start)
    # Every placement that runs a node is scripted (with no step when the record has none), so
    # that no node's code ever runs: a replay only tells what the record says.
    nodes = {
        p.id: steps.get(p.id, [])
        for p in flow.placements
        if isinstance(p, Task | Phase) and node_ref(p) is not None
    }
    signals = _signals(mine, start, state)
    deadline = _deadline(mine, start)
    latest = max((e.at for e in mine), default=start) - start
    return Script(
        input=dict(state),
        start=start,
        run_id=run.id,
        deadline=deadline,
        nodes=nodes,
        signals=signals,
        until=max(DEFAULT_UNTIL, latest + timedelta(days=1), (deadline or timedelta()) * 2),
    )


def _steps(events: Sequence[EventRecord], start: datetime) -> dict[str, list[NodeStep]]:
    """Each placement's attempts, in order: what each did and after how long."""
    steps: dict[str, list[NodeStep]] = {}
    began: dict[str, datetime] = {}  # token -> when its current attempt began
    keys: dict[str, str | None] = {}
    for e in events:
        token = e.token_id or ""
        if e.kind == "node_started":
            began[token] = e.at
            continue
        if e.kind == "signalled" and e.data.get("output") is None:
            began[token] = e.at  # the node runs again with the signal: a new attempt
            continue
        if token not in began or e.placement is None:
            continue
        after = e.at - began[token]
        step: NodeStep | None = None
        if e.kind == "node_finished":
            step = NodeStep(after=after or None, output=str(e.data["output"]))
        elif e.kind == "parked":
            key = e.data.get("key")
            keys[str(e.data.get("park"))] = key if isinstance(key, str) else None
            step = NodeStep(after=after or None, park=ParkStep(key=keys[str(e.data["park"])]))
        elif e.kind == "node_failed":
            message = str(e.data.get("error", {}).get("message") or "failed")
            step = NodeStep.model_validate({"after": after or None, "raise": message})
        elif e.kind == "node_timed_out":
            step = NodeStep.model_validate({"after": NEVER_ANSWERED, "raise": UNKNOWN_LATER})
        if step is not None:
            del began[token]
            steps.setdefault(e.placement, []).append(step)
    return steps


def _signals(
    events: Sequence[EventRecord], start: datetime, state: Mapping[str, Any]
) -> list[ScriptedSignal]:
    parks = {str(e.data.get("park")): e.data.get("key") for e in events if e.kind == "parked"}
    signals = []
    for e in events:
        if e.kind != "signalled" or e.placement is None:
            continue
        keys = [k for k in e.data.get("keys") or () if k in state]
        key = parks.get(str(e.data.get("park")))
        output = e.data.get("output")
        signals.append(
            ScriptedSignal(
                at=e.at - start,
                placement=e.placement,
                key=key if isinstance(key, str) else None,
                payload={k: state[k] for k in keys} or None,
                output=output if isinstance(output, str) else None,
            )
        )
    return signals


def _deadline(events: Sequence[EventRecord], start: datetime) -> timedelta | None:
    for e in events:
        if e.kind == "run_started" and isinstance(e.data.get("deadline"), str):
            return datetime.fromisoformat(e.data["deadline"]) - start
    return None
