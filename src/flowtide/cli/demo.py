"""``flowtide demo``: bundled example flows run end to end, then every bundled example checked.

Each scene runs on a virtual clock with the stand-in nodes of :mod:`flowtide.demo`, so a model
call slower than its 60 s window, a ten-minute payment window and a twelve-hour approval all play
out in moments. Times are shown as time since the run started (``+10:00``, ``+12:00:00``).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table

from flowtide.cli.common import ExitCode, display_path, fail, guarded, out, print_problems
from flowtide.cli.examples import bundled_examples, bundled_scripts, examples_dir
from flowtide.cli.inputs import LIFECYCLE_STYLE
from flowtide.cli.loading import load_files
from flowtide.cli.stores import store_option
from flowtide.demo import EXAMPLE_NODES, run_approval_demo, run_checkout_demo, run_dispatcher_demo
from flowtide.demo.approval import ApprovalRun
from flowtide.demo.checkout import START as CHECKOUT_START
from flowtide.demo.checkout import CheckoutRun
from flowtide.demo.dispatcher import DemoRun
from flowtide.demo.durable import DurableScene, play_durable
from flowtide.demo.timing import since
from flowtide.engine import ErrorInfo
from flowtide.render.mermaid import render_mermaid

MAX_TABLE_WIDTH = 100

SCENES = (
    (
        "A payment that outlives its worker: start, two workers, one killed, callbacks",
        "The node-anchored payment kept in a SQLite file and worked by separate flowtide "
        "processes, its ten-minute window cut to eight seconds so the scene plays in real time.",
    ),
    (
        "A support bot: a stuck model call stops at 60 s, a handover waits for a human",
        "Four messages through examples/support-dispatcher-timeouts.jsonld, whose model "
        "calls get 60 s each: a stuck one fails its own run only, and a message for a human "
        "parks, holding no worker, until the operator's reply is signalled.",
    ),
    (
        "Ten minutes to pay, however many retries: the timeout anchor decides",
        "The gateway declines at +2:00, +5:00 and +9:00, the customer retries each time "
        "(the last at +9:30), and the gateway's 'paid' comes at +10:30, played on the two "
        "checkout examples and on the first one with the default anchor.",
    ),
    (
        "An approval nobody answers: reminders, escalations, and a deadline that holds",
        "examples/escalation-ladder.yaml: a reminder after each hour of waiting, the next "
        "level after four hours, and twelve hours in all from the request, however often it "
        "was escalated.",
    ),
    (
        "Every bundled example validates and renders as a Mermaid flowchart",
        "",
    ),
)
"""Each scene's one line (what it shows, why it matters) and the setting it plays in."""


@guarded
def demo(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write each example's Mermaid chart into this folder as <name>.mmd "
            "(default: a new temporary folder, printed at the end).",
            file_okay=False,
        ),
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="Print each example's Mermaid chart.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the runs as JSON, and nothing else.")
    ] = False,
) -> None:
    """Play a durable payment across processes, three bundled flows on a virtual clock, then
    validate and render every example.

    A payment kept in a SQLite file while one worker process is killed and another finishes it,
    a support bot (a model call past its 60 s window, a handover to a human), a payment with
    ten minutes for every retry, and an approval with reminders and escalations.
    """
    paths = bundled_examples()
    if not paths:
        raise fail("no bundled examples found in this installation", ExitCode.FAILURE)
    folder = examples_dir()
    assert folder is not None
    durable = play_durable(
        folder / "checkout-node-anchor.yaml", Path(tempfile.mkdtemp(prefix="flowtide-demo-"))
    )
    dispatcher = asyncio.run(run_dispatcher_demo())
    checkout = asyncio.run(run_checkout_demo())
    approval = asyncio.run(run_approval_demo())
    if json_output:
        data = {
            "durable": _durable_json(durable),
            "dispatcher": [_dispatcher_json(r) for r in dispatcher],
            "checkout": [_checkout_json(r) for r in checkout],
            "approval": _approval_json(approval),
        }
        out.print_json(json.dumps(data, default=str))
        return
    _say("[bold]Flowtide demo[/]: durable runs, then timeouts, parking and anchors.")
    _scene(1)
    out.print(_durable_table(durable))
    _say(
        f"[dim]The file: {escape(durable.store)}. Look: "
        f"flowtide runs{escape(store_option(durable.store))} (and show, history or explain a "
        "run, with the same --store).[/]"
    )
    _say(
        "\nThe next scenes run on a virtual clock, so hours pass in a moment. Times are since "
        "the run started: +10:00 is ten minutes in, +12:00:00 twelve hours."
    )
    _scene(2)
    out.print(_dispatcher_table(dispatcher))
    _scene(3)
    out.print(_checkout_table(checkout))
    _scene(4)
    out.print(_approval_table(approval))
    _examples(paths, output, show)


def _scene(number: int) -> None:
    title, setting = SCENES[number - 1]
    out.print()
    _say(f"[bold]{number}. {escape(title)}[/]")
    if setting:
        _say(f"[dim]{escape(setting)}[/]")


def _say(text: str) -> None:
    """Prose, wrapped on spaces as wide as the tables."""
    out.print(text, soft_wrap=False, width=min(out.width, MAX_TABLE_WIDTH))


def _table(*columns: Column) -> Table:
    return Table(*columns, width=min(out.width, MAX_TABLE_WIDTH))


# -- 1. durable runs ----------------------------------------------------------------------


def _durable_table(scene: DurableScene) -> Table:
    table = _table(
        Column("time", width=6, no_wrap=True, justify="right"),
        Column("who", width=14, no_wrap=True),
        Column("what happened", ratio=1),
    )
    for step in scene.steps:
        style = "red" if step.who == "kill -9" else "white"
        table.add_row(f"{step.at:.1f} s", f"[{style}]{escape(step.who)}[/]", escape(step.what))
    return table


def _durable_json(scene: DurableScene) -> dict[str, Any]:
    return {
        "store": scene.store,
        "run_id": scene.run_id,
        "lifecycle": scene.lifecycle,
        "outcome": scene.outcome,
        "late_callback_refused": scene.refused,
        "steps": [{"at": s.at, "who": s.who, "what": s.what} for s in scene.steps],
    }


# -- 2. the support dispatcher ------------------------------------------------------------


def _dispatcher_table(runs: list[DemoRun]) -> Table:
    table = _table(
        Column("message", ratio=3),
        Column("what happened", ratio=7),
        Column("run", width=10, no_wrap=True),
    )
    for r in runs:
        res = r.result
        started = r.history[0].at if r.history else None
        lines = [escape(" → ".join(_steps(r.path)))]
        if r.parked is not None and started is not None:
            parked = next(e.at for e in r.history if e.kind == "parked")
            answered = next(e.at for e in r.history if e.kind == "signalled")
            lines.append(
                f"[cyan]parked at {since(parked - started)} for an operator, who answered at "
                f"{since(answered - started)}[/]"
            )
        if res.errors:
            lines.append(_error_text(res.errors[0]))
        else:
            lines.append(f"reply: {escape(str(res.state.get('response', '')))}")
        style = LIFECYCLE_STYLE.get(res.lifecycle, "white")
        table.add_row(
            escape(r.case.title),
            "\n".join(lines),
            f"[{style}]{res.lifecycle.value}[/]\nat {since(r.elapsed)}",
        )
    return table


def _steps(path: tuple[str, ...]) -> list[str]:
    """The placements in order, a node that parked and ran again named once."""
    return [p for i, p in enumerate(path) if i == 0 or path[i - 1] != p]


def _error_text(error: ErrorInfo) -> str:
    details = error.details
    if error.type == "NodeTimeoutError" and {"placement", "budget"} <= details.keys():
        what = f"{details['placement']} ran past its timeout of {details['budget']}"
    else:
        what = error.message
    return f"[red]{escape(error.type)}[/]: {escape(str(what))}"


def _dispatcher_json(r: DemoRun) -> dict[str, Any]:
    return {
        "case": r.case.title,
        "input": r.case.input,
        "path": list(r.path),
        "elapsed_seconds": r.elapsed.total_seconds(),
        "parked": r.parked.to_dict() if r.parked is not None else None,
        "result": r.result.to_dict(),
    }


# -- 3. the payment window ----------------------------------------------------------------

MODEL_NOTES = {
    "node anchor": "ten minutes from the first try",
    "park anchor": "ten fresh minutes for each try",
    "wait branch + first join": "a ten-minute wait races the payment",
}


def _checkout_table(runs: list[CheckoutRun]) -> Table:
    table = _table(
        Column("model", ratio=5),
        Column("outcome", ratio=3),
        Column("the gateway's 'paid' at +10:30", ratio=4),
    )
    for r in runs:
        late = r.answers[-1]
        if late.refused is None:
            answer = "[green]taken[/]"
        else:
            when = late.refused.at
            at = f" at {since(when - CHECKOUT_START)}" if when is not None else ""
            answer = f"[yellow]refused[/]: {escape(str(late.refused.reason))}{at}"
        style = "green" if r.result.outcome == "paid" else "yellow"
        ended = f" at {since(r.ended_after)}" if r.ended_after is not None else ""
        note = MODEL_NOTES.get(r.model)
        table.add_row(
            escape(r.model) + (f"\n[dim]{escape(note)}[/]" if note else ""),
            f"[{style}]{escape(str(r.result.outcome))}[/]{ended}",
            answer,
        )
    return table


def _checkout_json(r: CheckoutRun) -> dict[str, Any]:
    ended = r.ended_after
    return {
        "model": r.model,
        "outcome": r.result.outcome,
        "ended_after_seconds": ended.total_seconds() if ended is not None else None,
        "refused": [
            {"minute": a.minute, "placement": a.placement, "reason": str(a.refused)}
            for a in r.answers
            if a.refused is not None
        ],
        "result": r.result.to_dict(),
    }


# -- 4. the escalation ladder -------------------------------------------------------------


def _approval_table(run: ApprovalRun) -> Table:
    table = _table(Column("time", width=9, no_wrap=True), Column("what happened"))
    for moment in run.timeline:
        table.add_row(since(moment.after, hours=True), escape(moment.what))
    return table


def _approval_json(run: ApprovalRun) -> dict[str, Any]:
    return {
        "timeline": [
            {"after_seconds": m.after.total_seconds(), "what": m.what} for m in run.timeline
        ],
        "late_approval": str(run.late),
        "result": run.result.to_dict(),
    }


# -- 5. every bundled example -------------------------------------------------------------


def _examples(paths: list[Path], output: Path | None, show: bool) -> None:
    _scene(5)
    folder = examples_dir()
    if folder is not None:
        _say(f"[dim]{len(paths)} example flows in {escape(str(folder))}[/]")
    target = output if output is not None else Path(tempfile.mkdtemp(prefix="flowtide-demo-"))
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create {target}: {exc}", ExitCode.FAILURE) from None
    table = _table(
        Column("example", ratio=3, no_wrap=True),
        Column("placements", justify="right", width=10),
        Column("check", ratio=2),
    )
    broken = warned = 0
    for item in load_files(paths):
        print_problems(item.errors)
        if item.flow is None:
            broken += 1
            table.add_row(escape(item.path.name), "", f"[red]{_count(item.errors, 'error')}[/]")
            continue
        chart = render_mermaid(item.flow)
        destination = target / f"{item.path.stem}.mmd"
        try:
            destination.write_text(chart, encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot write {destination}: {exc}", ExitCode.FAILURE) from None
        if show:
            out.print(f"\n[bold]{escape(item.path.name)}[/]")
            out.print(escape(chart), end="")
        check = "[green]valid[/]"
        if item.warnings:
            warned += 1
            check += f", [yellow]{_count(item.warnings, 'warning')}[/]"
        table.add_row(escape(item.path.name), str(len(item.flow.placements)), check)
    out.print(table)
    _say(f"Mermaid charts written to {escape(display_path(target))}, one <example>.mmd each.")
    if warned:
        _say("flowtide validate FILE lists an example's warnings.")
    _try_it(paths)
    if broken:
        raise fail(f"{broken} bundled example(s) are invalid", ExitCode.FAILURE)


def _count(items: Any, noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")


def _try_it(paths: list[Path]) -> None:
    """How to run an example by hand, with the stand-in nodes Flowtide ships."""
    runnable = [p for p in paths if p.name in EXAMPLE_NODES]
    if not runnable:
        return
    modules = ", ".join(escape(m) for m in sorted(set(EXAMPLE_NODES.values())))
    _say(f"Each example runs with the stand-in nodes Flowtide ships ({modules}), for instance:")
    example = next((p for p in runnable if p.name == "support-dispatcher.jsonld"), runnable[0])
    out.print(
        f"  flowtide run {escape(display_path(example))} \\\n"
        f"      --nodes {escape(EXAMPLE_NODES[example.name])} \\\n"
        """      --input '{"message": "Where is my order?"}'"""
    )
    stories = [
        (script, flow)
        for script in bundled_scripts()
        if (flow := script.with_name(script.name.replace(".simulate", ""))).name in EXAMPLE_NODES
    ]
    if stories:
        script, flow = stories[0]
        _say("A script plays a story on an example, and says what happened when:")
        out.print(
            f"  flowtide simulate {escape(display_path(flow))} \\\n"
            f"      --script {escape(display_path(script))} \\\n"
            f"      --nodes {escape(EXAMPLE_NODES[flow.name])}"
        )
