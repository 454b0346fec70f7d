"""What-if: the flow's recorded runs played again on the virtual clock with edited node settings,
and what would have changed.

::

    report = await whatif(store, "urn:shop:flow:checkout", {"collect-payment.timeout": "PT5M"})
    for line in report.lines():
        print(line)

The last ``last`` runs of the flow's latest stored version are taken (runs of earlier versions
are left out and counted: they ran another document). Each is turned into a script from its
history (:mod:`flowtide.simulation.recorded`) and played twice, no node code running: with the
flow as recorded — a check, which must end as the run ended; a run that does not is reported
and left out of the comparison — and with the edits. The two plays are compared per placement
(runs that would have expired, would no longer expire, reminders and retries more or fewer)
and per run (outcomes changed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from flowtide.client.registration import stored_catalog
from flowtide.engine.flows.stored_flows import flow_from_stored
from flowtide.errors import FlowValidationError
from flowtide.model.durations import format_duration
from flowtide.model.flow import Flow
from flowtide.simulation.edits import apply_edits, parse_edits
from flowtide.simulation.play import play_script
from flowtide.simulation.recorded import NotReplayable, recorded_end, script_of_run
from flowtide.simulation.timeline import Timeline
from flowtide.store import RunRecord
from flowtide.store.base import Store

__all__ = [
    "DEFAULT_LAST",
    "IDS_SHOWN",
    "OutcomeChange",
    "PlacementChange",
    "Progress",
    "Skipped",
    "Unreproduced",
    "WhatIfReport",
    "whatif",
]

DEFAULT_LAST = 100
"""How many of the flow's last runs are played again, unless told."""
IDS_SHOWN = 5
"""How many run ids a summary line names before it says how many more."""
TOLERANCE = timedelta(seconds=1)
"""How far a replayed end may be from the recorded one and still reproduce it (a run recorded
on a real clock took a few milliseconds the virtual clock does not)."""

Progress = Callable[[int, int], None]
"""Told (runs played, runs to play) after each run."""


def _short(run_id: str) -> str:
    return run_id[:8] + "…" if len(run_id) > 9 else run_id


def _ids(run_ids: Sequence[str]) -> str:
    shown = ", ".join(_short(r) for r in run_ids[:IDS_SHOWN])
    more = len(run_ids) - IDS_SHOWN
    return f"runs {shown}" + (f" and {more} more" if more > 0 else "")


def _more_or_fewer(delta: int, what: str) -> str | None:
    if delta == 0:
        return None
    noun = what if abs(delta) == 1 else what + "s"
    return f"{abs(delta)} {noun} {'more' if delta > 0 else 'fewer'}"


@dataclass(frozen=True, slots=True)
class PlacementChange:
    """What the edits would have changed at one placement, over the runs compared."""

    placement: str
    runs: int
    """How many runs were compared."""
    would_expire: tuple[str, ...]
    """Runs that timed out at this placement with the edits and not as recorded."""
    no_longer_expire: tuple[str, ...]
    """Runs that timed out here as recorded and would not have with the edits."""
    reminders_before: int
    reminders_after: int
    """Non-interrupting timers fired here, as recorded and with the edits (all runs)."""
    retries_before: int
    retries_after: int

    @property
    def changed(self) -> bool:
        return bool(
            self.would_expire
            or self.no_longer_expire
            or self.reminders_before != self.reminders_after
            or self.retries_before != self.retries_after
        )

    def summary(self) -> str:
        """One line: ``collect-payment: 3 of the last 100 runs would have expired (runs …), 2
        reminders fewer``."""
        parts = []
        if self.would_expire:
            n = len(self.would_expire)
            parts.append(
                f"{n} of the last {self.runs} runs would have expired ({_ids(self.would_expire)})"
            )
        if self.no_longer_expire:
            n = len(self.no_longer_expire)
            parts.append(
                f"{n} of the last {self.runs} runs would no longer expire "
                f"({_ids(self.no_longer_expire)})"
            )
        for delta, what in (
            (self.reminders_after - self.reminders_before, "reminder"),
            (self.retries_after - self.retries_before, "retry"),
        ):
            said = _more_or_fewer(delta, what)
            if said is not None:
                parts.append(said.replace("retrys", "retries"))
        if not parts:
            parts.append(f"no change over the last {self.runs} runs")
        return f"{self.placement}: {', '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "runs": self.runs,
            "would_expire": list(self.would_expire),
            "no_longer_expire": list(self.no_longer_expire),
            "reminders": {"before": self.reminders_before, "after": self.reminders_after},
            "retries": {"before": self.retries_before, "after": self.retries_after},
            "summary": self.summary(),
        }


@dataclass(frozen=True, slots=True)
class OutcomeChange:
    """A run that would have ended with another lifecycle or outcome with the edits (or not
    ended at all)."""

    run_id: str
    before: str
    after: str
    """How it ended, in words: ``completed 'paid' after 3:00``, ``parked, not ended``."""

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "before": self.before, "after": self.after}


@dataclass(frozen=True, slots=True)
class Unreproduced:
    """A run whose replay with the recorded settings did not end as it did."""

    run_id: str
    recorded: str
    replayed: str

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "recorded": self.recorded, "replayed": self.replayed}


@dataclass(frozen=True, slots=True)
class Skipped:
    """A run not played again, and why."""

    run_id: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class WhatIfReport:
    """What the edits would have done to the flow's last runs."""

    flow_id: str
    version: str
    digest: str
    edits: Mapping[str, Any]
    last: int
    """How many runs were asked for."""
    taken: int
    """How many runs of the latest version there were to take (at most ``last``)."""
    compared: tuple[str, ...]
    """The runs that reproduced their recorded end and were compared."""
    placements: tuple[PlacementChange, ...]
    outcomes: tuple[OutcomeChange, ...]
    unreproduced: tuple[Unreproduced, ...]
    skipped: tuple[Skipped, ...]
    other_versions: int
    """Runs of the flow on earlier versions, left out."""

    def lines(self) -> list[str]:
        """The report in words: one line per placement, then the outcomes and what was left
        out."""
        lines = [p.summary() for p in self.placements]
        n = len(self.compared)
        if self.outcomes:
            lines.append(
                f"outcomes: {len(self.outcomes)} of the last {n} runs would have ended "
                f"otherwise ({_ids([o.run_id for o in self.outcomes])})"
            )
        else:
            lines.append(f"outcomes: none of the last {n} runs would have ended otherwise")
        if self.unreproduced:
            ids = _ids([u.run_id for u in self.unreproduced])
            lines.append(
                f"{len(self.unreproduced)} run(s) did not reproduce their recorded end when "
                f"played again and are not compared ({ids})"
            )
        if self.skipped:
            ids = _ids([s.run_id for s in self.skipped])
            lines.append(f"{len(self.skipped)} run(s) not played again ({ids})")
        if self.other_versions:
            lines.append(
                f"{self.other_versions} run(s) of earlier versions of the flow left out "
                f"(only version {self.version} is played)"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow_id,
            "version": self.version,
            "digest": self.digest,
            "edits": {name: _plain(value) for name, value in self.edits.items()},
            "last": self.last,
            "taken": self.taken,
            "compared": list(self.compared),
            "placements": [p.to_json() for p in self.placements],
            "outcomes": [o.to_json() for o in self.outcomes],
            "unreproduced": [u.to_json() for u in self.unreproduced],
            "skipped": [s.to_json() for s in self.skipped],
            "other_versions": self.other_versions,
            "summary": self.lines(),
        }


def _plain(value: Any) -> Any:
    """An edit's value as JSON (a duration given as a ``timedelta``: ISO 8601 text)."""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class _Tally:
    """What one play did at each placement."""

    timed_out: frozenset[str]
    reminders: Mapping[str, int]
    retries: Mapping[str, int]
    end: str
    outcome: tuple[str, str | None, bool]
    """Lifecycle, outcome, ended: what an outcome change compares (not when it ended)."""


def _tally(timeline: Timeline) -> _Tally:
    timed_out: set[str] = set()
    reminders: dict[str, int] = {}
    retries: dict[str, int] = {}
    for m in timeline.moments:
        if m.run is not None or m.placement is None:
            continue
        if m.kind == "node_timed_out":
            timed_out.add(m.placement)
        elif m.kind == "node_retried":
            retries[m.placement] = retries.get(m.placement, 0) + 1
        elif (
            m.kind == "timer_fired"
            and m.data.get("purpose") == "timer"
            and not m.data.get("interrupting")
        ):
            reminders[m.placement] = reminders.get(m.placement, 0) + 1
    r = timeline.result
    outcome = (r.lifecycle.value, r.outcome, r.ended_at is not None)
    return _Tally(frozenset(timed_out), reminders, retries, _end_words(timeline), outcome)


def _end_words(timeline: Timeline) -> str:
    r = timeline.result
    outcome = f" {r.outcome!r}" if r.outcome else ""
    if r.ended_at is None:
        return f"{r.lifecycle.value}{outcome}, not ended"
    after = r.ended_at - r.started_at
    return f"{r.lifecycle.value}{outcome} after {_clock(after)}"


def _clock(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _reproduces(timeline: Timeline, lifecycle: str, outcome: str | None, after: timedelta) -> bool:
    r = timeline.result
    if r.ended_at is None or r.lifecycle.value != lifecycle or r.outcome != outcome:
        return False
    return abs((r.ended_at - r.started_at) - after) <= TOLERANCE


async def whatif(
    store: Store,
    flow_id: str,
    edits: Mapping[str, Any],
    last: int = DEFAULT_LAST,
    *,
    progress: Progress | None = None,
) -> WhatIfReport:
    """Play the last ``last`` runs of the latest stored ``flow_id`` again with and without
    ``edits`` (``{"<placement>.<setting>": value}``) and tell what would have changed. Raises
    :class:`FlowValidationError` for bad edits, before anything is played, and
    :class:`~flowtide.store.base.UnknownStoredFlow`."""
    if last < 1:
        raise ValueError(f"'last' must be at least 1, not {last}")
    stored = await store.latest_flow(flow_id)
    flow = flow_from_stored(stored)
    parsed = parse_edits(edits, flow)
    edited = apply_edits(stored.document, parsed, await stored_catalog(store))
    runs, others = await _runs(store, flow_id, stored.digest, last)
    played = _Played()
    for done, run in enumerate(runs, start=1):
        await played.play(store, run, flow, edited)
        if progress is not None:
            progress(done, len(runs))
    names = list(dict.fromkeys([*(e.placement for e in parsed), *played.placements()]))
    return WhatIfReport(
        flow_id=flow.id,
        version=flow.version,
        digest=stored.digest,
        edits=dict(edits),
        last=last,
        taken=len(runs),
        compared=tuple(played.compared),
        placements=tuple(played.change(p) for p in names),
        outcomes=tuple(played.outcomes),
        unreproduced=tuple(played.unreproduced),
        skipped=tuple(played.skipped),
        other_versions=others,
    )


async def _runs(store: Store, flow_id: str, digest: str, last: int) -> tuple[list[RunRecord], int]:
    """The last ``last`` top-level runs of the document ``digest``, oldest first, and how many
    runs of ``flow_id`` ran another document."""
    mine: list[RunRecord] = []
    others = 0
    for run in await store.list_runs():
        if run.flow_id != flow_id or run.parent_run_id is not None:
            continue
        if run.options.get("flow_digest") == digest:
            mine.append(run)
        else:
            others += 1
    mine.sort(key=lambda r: (r.created_at, r.id))
    return mine[-last:], others


@dataclass
class _Played:
    """The plays so far: each compared run's two tallies, and what was not compared."""

    compared: list[str] = field(default_factory=list)
    before: dict[str, _Tally] = field(default_factory=dict)
    after: dict[str, _Tally] = field(default_factory=dict)
    outcomes: list[OutcomeChange] = field(default_factory=list)
    unreproduced: list[Unreproduced] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    async def play(self, store: Store, run: RunRecord, flow: Flow, edited: Flow) -> None:
        events = await store.history(run.id)
        try:
            end = recorded_end(events)
            script = script_of_run(run, events, await store.get_state(run.id), flow)
            before = await play_script(script, flow, run_code=False)
            after = await play_script(script, edited, run_code=False)
        except NotReplayable as exc:
            self.skipped.append(Skipped(run.id, str(exc)))
            return
        except FlowValidationError as exc:
            reason = "; ".join(p.message for p in exc.problems)
            self.skipped.append(Skipped(run.id, f"its record cannot be played: {reason}"))
            return
        except ValidationError as exc:  # (a state or payload a script cannot carry)
            reason = "; ".join(err["msg"] for err in exc.errors())
            self.skipped.append(Skipped(run.id, f"its record cannot be played: {reason}"))
            return
        if not _reproduces(before, end.lifecycle, end.outcome, end.after):
            self.unreproduced.append(Unreproduced(run.id, end.words(), _end_words(before)))
            return
        self.compared.append(run.id)
        self.before[run.id] = _tally(before)
        self.after[run.id] = tally = _tally(after)
        if tally.outcome != self.before[run.id].outcome:
            self.outcomes.append(OutcomeChange(run.id, self.before[run.id].end, tally.end))

    def placements(self) -> list[str]:
        """Placements where something changed, in the order first met."""
        seen: dict[str, None] = {}
        for run_id in self.compared:
            b, a = self.before[run_id], self.after[run_id]
            for p in [*b.timed_out ^ a.timed_out]:
                seen.setdefault(p)
            for mapping_b, mapping_a in ((b.reminders, a.reminders), (b.retries, a.retries)):
                for p in {*mapping_b, *mapping_a}:
                    if mapping_b.get(p, 0) != mapping_a.get(p, 0):
                        seen.setdefault(p)
        return sorted(seen)

    def change(self, placement: str) -> PlacementChange:
        runs = self.compared
        return PlacementChange(
            placement=placement,
            runs=len(runs),
            would_expire=tuple(
                r
                for r in runs
                if placement in self.after[r].timed_out
                and placement not in self.before[r].timed_out
            ),
            no_longer_expire=tuple(
                r
                for r in runs
                if placement in self.before[r].timed_out
                and placement not in self.after[r].timed_out
            ),
            reminders_before=sum(self.before[r].reminders.get(placement, 0) for r in runs),
            reminders_after=sum(self.after[r].reminders.get(placement, 0) for r in runs),
            retries_before=sum(self.before[r].retries.get(placement, 0) for r in runs),
            retries_after=sum(self.after[r].retries.get(placement, 0) for r in runs),
        )
