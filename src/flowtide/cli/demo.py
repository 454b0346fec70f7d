"""``flowtide demo``: the support dispatcher run end to end, then every bundled example checked.

The dispatcher runs on a virtual clock with stand-in nodes (see :mod:`flowtide.demo`), so a model
call slower than its 60 s window is shown timing out in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from flowtide.cli.common import ExitCode, fail, guarded, out, print_problems
from flowtide.cli.examples import bundled_examples, examples_dir
from flowtide.cli.loading import load_files
from flowtide.cli.run import LIFECYCLE_STYLE
from flowtide.demo import run_checkout_demo, run_dispatcher_demo
from flowtide.demo.checkout import CheckoutRun
from flowtide.render.mermaid import render_mermaid


@guarded
def demo(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write each example's Mermaid chart into this folder as <name>.mmd.",
            file_okay=False,
        ),
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="Print each example's Mermaid chart.")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the dispatcher runs as JSON, and nothing else.")
    ] = False,
) -> None:
    """Run the support dispatcher end to end, then validate and render every bundled example.

    The dispatcher gets four messages: a routine question, one that needs a human, an empty one,
    and one whose (simulated) model call takes 90 s, past classify-message's 60 s window.
    """
    paths = bundled_examples()
    if not paths:
        raise fail("no bundled examples found in this installation", ExitCode.FAILURE)
    dispatcher = _run_dispatcher(json_output)
    checkout = _run_checkout(json_output)
    if json_output:
        out.print_json(json.dumps({"dispatcher": dispatcher, "checkout": checkout}, default=str))
        return
    out.print(
        f"[bold]Flowtide demo[/]: {len(paths)} example flows from {escape(str(examples_dir()))}"
    )
    if output is not None:
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"cannot create {output}: {exc}", ExitCode.FAILURE) from None
    table = Table("example", "flow", "placements", "result")
    for column in table.columns:
        column.overflow = "fold"
    broken = 0
    for item in load_files(paths):
        print_problems(item.errors)
        if item.flow is None:
            broken += 1
            table.add_row(escape(item.path.name), "", "", f"[red]{len(item.errors)} error(s)[/]")
            continue
        chart = render_mermaid(item.flow)
        if output is not None:
            target = output / f"{item.path.stem}.mmd"
            try:
                target.write_text(chart, encoding="utf-8")
            except OSError as exc:
                raise fail(f"cannot write {target}: {exc}", ExitCode.FAILURE) from None
        if show:
            out.print(f"\n[bold]{escape(item.path.name)}[/]")
            out.print(escape(chart), end="")
        result = "[green]valid, rendered[/]"
        if item.warnings:
            result += f" [yellow]({len(item.warnings)} warning(s): flowtide validate)[/]"
        table.add_row(
            escape(item.path.name), escape(item.flow.label), str(len(item.flow.placements)), result
        )
    out.print(table)
    if output is not None:
        out.print(f"Mermaid charts written to {escape(str(output))}")
    if broken:
        raise fail(f"{broken} bundled example(s) are invalid", ExitCode.FAILURE)


def _run_dispatcher(json_output: bool) -> list[dict[str, object]]:
    runs = asyncio.run(run_dispatcher_demo())
    if json_output:
        return [
            {
                "case": r.case.title,
                "input": r.case.input,
                "path": list(r.path),
                "elapsed_seconds": r.elapsed.total_seconds(),
                "parked": r.parked.to_dict() if r.parked is not None else None,
                "result": r.result.to_dict(),
            }
            for r in runs
        ]
    table = Table("message", "path", "run", "reply / error", "time (virtual)")
    for column in table.columns:
        column.overflow = "fold"
    for r in runs:
        res = r.result
        style = LIFECYCLE_STYLE.get(res.lifecycle, "white")
        if res.errors:
            detail = f"[red]{escape(res.errors[0].type)}[/]: {escape(res.errors[0].message)}"
        else:
            detail = escape(str(res.state.get("response", "")))
        if r.parked is not None:
            detail = f"[cyan]parked for an operator, then signalled[/]: {detail}"
        table.add_row(
            escape(r.case.title),
            escape(" → ".join(r.path)),
            f"[{style}]{res.lifecycle.value}[/]",
            detail,
            f"{r.elapsed.total_seconds():g} s",
        )
    out.print("[bold]Flowtide demo[/]: the support dispatcher, run by the engine")
    out.print(table)
    return []


def _run_checkout(json_output: bool) -> list[dict[str, object]]:
    runs = asyncio.run(run_checkout_demo())
    if json_output:
        return [
            {
                "model": r.model,
                "outcome": r.result.outcome,
                "ended_after_seconds": _seconds(r),
                "refused": [
                    {"minute": a.minute, "placement": a.placement, "reason": str(a.refused)}
                    for a in r.answers
                    if a.refused is not None
                ],
                "result": r.result.to_dict(),
            }
            for r in runs
        ]
    table = Table("model", "outcome", "ended after", "the gateway's 'paid' at 10:30")
    for column in table.columns:
        column.overflow = "fold"
    for r in runs:
        late = r.answers[-1]
        answer = (
            f"[yellow]refused[/]: {escape(str(late.refused).removeprefix('signal refused: '))}"
            if late.refused is not None
            else "[green]taken[/]"
        )
        style = "green" if r.result.outcome == "paid" else "yellow"
        table.add_row(
            escape(r.model),
            f"[{style}]{escape(str(r.result.outcome))}[/]",
            f"{_seconds(r) / 60:g} min",
            answer,
        )
    out.print(
        "\n[bold]Flowtide demo[/]: a payment the customer may retry, within ten minutes of the "
        "first try\n(declines at minutes 2, 5 and 9, retries right after, the last at 9:30)"
    )
    out.print(table)
    return []


def _seconds(run: CheckoutRun) -> float:
    return run.ended_after.total_seconds() if run.ended_after is not None else float("nan")
