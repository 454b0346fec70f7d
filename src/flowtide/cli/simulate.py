"""``flowtide simulate``: play a script of signals and node outcomes against a flow on a virtual
clock, and print what happened when.

The playing is :mod:`flowtide.simulation`'s; this module reads the command's inputs and prints
the timeline, the windows and the result. Times are since the run started (``+9:30``,
``+1:02:03``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import NodesOption, WithOption, display_path, guarded, out
from flowtide.cli.inputs import LIFECYCLE_STYLE, flows_to_run
from flowtide.demo.timing import since
from flowtide.errors import Problem
from flowtide.model.durations import format_duration
from flowtide.model.flow import Flow, node_ref
from flowtide.model.settings import TimeoutAnchor
from flowtide.simulation import (
    Moment,
    Result,
    Script,
    Timeline,
    Window,
    anchor_words,
    compact_json,
    load_script,
    play_script,
)

NO_CODE_HINT = (
    "name the module that implements a node with --nodes MODULE, or script its placement "
    "(the script's 'nodes')"
)

SOURCE_WORDS = {
    "placement": "the placement",
    "node type": "the node type",
    "implementation default": "the implementation's default",
    "default": "default",
}
"""Where a setting came from (``explain``'s sources), in words."""


@guarded
def simulate(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="The flow document (JSON-LD, JSON or YAML).", show_default=False
        ),
    ],
    script: Annotated[
        Path,
        typer.Option(
            "--script",
            "-s",
            metavar="SCRIPT",
            help="The script to play (YAML or JSON): the run's input, scripted node outcomes "
            "by placement, signals at instants since the start (see docs/cli.md).",
            show_default=False,
        ),
    ],
    nodes: NodesOption = None,
    others: WithOption = None,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print the timeline, windows and result as one JSON object."),
    ] = False,
) -> None:
    """Play a script of signals and node outcomes against a flow on a virtual clock, and print
    what happened when.

    Hours of a flow play in milliseconds: every event of the run and every signal (accepted, or
    refused and why) at its time since the start, each window's deadline and anchor, and the
    result. A scripted placement needs no code; the other nodes run their implementation, found
    as flowtide run finds it. Exits 0 when the script played (whatever the run's outcome), 2 on
    bad input.
    """
    with current_directory_first():
        code = load_modules(nodes or [])
        plan = load_script(script)
        flows = flows_to_run(
            file, others or [], code, excused=_scripted(plan, code), hint=NO_CODE_HINT
        )
        timeline = asyncio.run(
            play_script(
                plan, flows[0], others=flows[1:], registry=code.registry(), source=str(script)
            )
        )
    if json_output:
        out.print_json(json.dumps(timeline.to_dict(), default=str))
        return
    out.print(
        f"[bold]{escape(flows[0].label)}[/]: {escape(display_path(script))} played on a virtual "
        f"clock from {timeline.start.isoformat().replace('+00:00', 'Z')}; times are since "
        "the run started."
    )
    _print_moments(timeline)
    _print_windows(timeline)
    _print_result(timeline)


def _scripted(script: Script, code: Code) -> Callable[[Flow, Problem], bool]:
    """A node with no implementation is no error at a placement the script plays."""

    def excused(flow: Flow, problem: Problem) -> bool:
        placement = problem.placement
        if placement is None or placement not in script.nodes:
            return False
        if not flow.has_placement(placement):
            return False
        ref = node_ref(flow.placement(placement))
        return ref is not None and problem.message == code.node(ref)

    return excused


def _t(timeline: Timeline, at: datetime | None) -> str:
    return since(timeline.since(at)) if at is not None else "?"


def _print_moments(timeline: Timeline) -> None:
    out.print()
    width = max((len(since(m.after)) for m in timeline.moments), default=5)
    for moment in timeline.moments:
        out.print(f"  [dim]{since(moment.after):>{width}}[/]  {_moment_text(moment)}")


def _moment_text(moment: Moment) -> str:
    where = f"[cyan]{escape(moment.run)}[/] ▸ " if moment.run else ""
    sent = moment.signal
    if sent is None:
        text = escape(moment.text)
        return where + (f"[bold]{text}[/]" if moment.kind == "run_finished" else text)
    if sent.accepted:
        head, _, _ = moment.text.rpartition(": accepted")
        return f"{where}[bold]{escape(head)}[/]: [green]accepted[/]"
    head, _, why = moment.text.rpartition(": refused, ")
    return f"{where}[bold]{escape(head)}[/]: [yellow]refused, {escape(why)}[/]"


def _print_windows(timeline: Timeline) -> None:
    out.print()
    if not timeline.windows:
        out.print("[bold]Windows[/]: no placement had a window, a timer or a wait.")
        return
    out.print("[bold]Windows[/] (the last visit of each placement that had one)")
    for window in timeline.windows:
        where = f"{window.run} ▸ " if window.run else ""
        lines = _window_lines(timeline, window)
        out.print(f"  [cyan]{escape(where + window.placement)}[/]: {escape(lines[0])}")
        for line in lines[1:]:
            out.print(f"    {escape(line)}")


def _window_lines(timeline: Timeline, w: Window) -> list[str]:
    def t(at: datetime | None) -> str:
        return _t(timeline, at)

    ended = _ending(w, t)
    if w.kind == "wait":
        length = f" + {format_duration(w.duration)}" if w.duration is not None else ""
        return [f"wait due {t(w.deadline)} = arrival ({t(w.anchor_at)}){length}{ended}"]
    lines = []
    if w.kind == "timeout" and w.duration is not None:
        anchor = TimeoutAnchor(w.anchor)
        at = t(w.anchor_at) + (f", visit {w.anchor_visit}" if w.anchor_visit else "")
        lines.append(
            f"deadline {t(w.deadline)} = anchor {w.anchor!r} "
            f"({anchor_words(anchor, at, parked=False).removeprefix('anchored at ')}) "
            f"+ timeout {format_duration(w.duration)}"
        )
        lines.append(
            f"timeout set by {SOURCE_WORDS.get(w.source or '', w.source)}, anchor by "
            f"{SOURCE_WORDS.get(w.anchor_source or '', w.anchor_source)}{ended}"
        )
    else:
        lines.append(f"escalation timers only{ended}")
    for timer in w.timers:
        how = "interrupting" if timer.interrupting else "not interrupting"
        state = "fired" if timer.fired else "did not fire"
        lines.append(
            f"timer {timer.index} ({how}, output {timer.output!r}): anchor "
            f"{timer.anchor.value!r} + {format_duration(timer.after)}, {state}"
        )
    return lines


def _ending(w: Window, t: Callable[[datetime | None], str]) -> str:
    visit = f"visit {w.visit} " if w.visit is not None else ""
    match w.ending:
        case None:
            return f"; {visit}still open" if w.kind != "wait" else "; still waiting"
        case "timed_out" if w.ended_by is None:
            return f"; {visit}timed out at {t(w.ended_at)}, with no 'timeout' route"
        case "timed_out":
            return f"; {visit}timed out at {t(w.ended_at)}, by its 'timeout' route"
        case "moved_on":
            return f"; {visit}moved on at {t(w.ended_at)} by output {w.ended_by!r}"
        case "elapsed":
            return f"; elapsed at {t(w.ended_at)}"
    return f"; {visit}{w.ending.replace('_', ' ')} at {t(w.ended_at)} ({w.ended_by})"


def _print_result(timeline: Timeline) -> None:
    r = timeline.result
    out.print()
    style = LIFECYCLE_STYLE.get(r.lifecycle, "white")
    outcome = f", outcome [bold]{escape(repr(r.outcome))}[/]" if r.outcome else ""
    if r.ended_at is not None:
        when = f", ended at {_t(timeline, r.ended_at)}"
        if r.stopped_at > r.ended_at:
            when += f" (the script played on to {_t(timeline, r.stopped_at)})"
    else:
        why = "the run never rested" if r.busy else "the script's 'until'"
        when = f": not ended when the clock stopped at {_t(timeline, r.stopped_at)} ({why})"
    out.print(f"[bold]Result[/]: [{style}]{r.lifecycle.value}[/]{outcome}{when}")
    _print_details(timeline, r)


def _print_details(timeline: Timeline, r: Result) -> None:
    if len(r.terminals) > 1:
        reached = ", ".join(r.terminals)
        out.print(f"  terminals reached: {escape(reached)} (the outcome is the first one's)")
    for p in r.parked:
        key = f" (key {p.key})" if p.key else ""
        until = f", window ends {_t(timeline, p.deadline)}" if p.deadline else ""
        out.print(f"  parked at {escape(p.placement)}{escape(key)}{until}")
    for e in r.errors:
        where = f" at {escape(e.placement)}" if e.placement else ""
        out.print(f"  [red]{escape(e.type)}[/]{where}: {escape(e.message)}")
    out.print(f"  state: {escape(compact_json(dict(r.state)))}")
