"""``flowtide whatif FLOW --set PLACEMENT.SETTING=VALUE``: play the flow's last recorded runs again
with edited node settings and print what would have changed; ``--save`` keeps the edited flow
as a new version.

The playing is :mod:`flowtide.simulation`'s; this module reads the edits and prints the report.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from flowtide.cli.common import BadInput, err, guarded, out
from flowtide.cli.stores import DEFAULT, StoreOption, emit_json, opened
from flowtide.client.results import RegisteredFlow
from flowtide.simulation.edits import register_edited
from flowtide.simulation.whatif import DEFAULT_LAST, WhatIfReport
from flowtide.simulation.whatif import Progress as Told
from flowtide.simulation.whatif import whatif as play_whatif
from flowtide.store.base import Store, UnknownStoredFlow

__all__ = ["parse_set", "whatif"]


def parse_set(given: list[str]) -> dict[str, Any]:
    """``PLACEMENT.SETTING=VALUE`` texts -> edits: a value is JSON (``60000``,
    ``'[{"after": "PT1H", "output": "remind"}]'``, ``null``) or else text (``PT15M``, ``node``).
    Raises :class:`BadInput` naming the text that is not an edit."""
    edits: dict[str, Any] = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise BadInput(
                f"--set {text!r}: an edit is PLACEMENT.SETTING=VALUE "
                "(such as collect-payment.timeout=PT15M)"
            )
        if name.strip() in edits:
            raise BadInput(f"--set {name.strip()}: given twice")
        try:
            edits[name.strip()] = json.loads(value)
        except ValueError:
            edits[name.strip()] = value.strip()
    return edits


@guarded
def whatif(
    flow: Annotated[
        str,
        typer.Argument(
            metavar="FLOW", help="The id of a flow kept in the store.", show_default=False
        ),
    ],
    edits: Annotated[
        list[str],
        typer.Option(
            "--set",
            metavar="PLACEMENT.SETTING=VALUE",
            help="An edit of a node setting (timeout, timeout_anchor, release_on, timers, "
            "retry): a JSON value or a duration text, such as collect-payment.timeout=PT15M. "
            "null removes the placement's own value. Repeat for more edits.",
            show_default=False,
        ),
    ],
    last: Annotated[
        int,
        typer.Option("--last", "-n", min=1, help="How many of the flow's last runs to play."),
    ] = DEFAULT_LAST,
    store: StoreOption = DEFAULT,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
    save: Annotated[
        bool,
        typer.Option(
            "--save",
            help="Also register the edited flow as a new version (runs started by the flow's "
            "id from now on use it; runs already started keep theirs).",
        ),
    ] = False,
) -> None:
    """Play a flow's last recorded runs again on a virtual clock with edited node settings, and
    print what would have changed: runs that would have expired or no longer expire, reminders
    and retries more or fewer, outcomes changed, per placement.

    Only runs of the flow's latest version are played, each twice and with no node code: with
    the settings it ran with (a run that does not end as recorded is reported and not compared)
    and with the edits. Exits 0 when the runs were played, 2 on bad input (nothing is played or
    saved).
    """
    report, saved = asyncio.run(_whatif(store, flow, parse_set(edits), last, save))
    if json_output:
        data = report.to_json()
        if saved is not None:
            data["saved"] = {
                "flow": saved.flow_id,
                "version": saved.version,
                "digest": saved.digest,
            }
        emit_json(data)
        return
    _print(report)
    if saved is not None:
        what = "saved" if saved.new else "already stored"
        out.print(
            f"{what}: [bold]{escape(saved.flow_id)}[/] version {escape(saved.version)} "
            f"({saved.digest[:12]})"
        )


def _saved_json(saved: RegisteredFlow) -> dict[str, Any]:
    return {"flow": saved.flow_id, "version": saved.version, "digest": saved.digest}


async def _whatif(
    url: str, flow: str, edits: dict[str, Any], last: int, save: bool
) -> tuple[WhatIfReport, RegisteredFlow | None]:
    store = await opened(url, create=False)
    try:
        with _progress() as told:
            try:
                report = await play_whatif(store, flow, edits, last, progress=told)
            except UnknownStoredFlow:
                raise BadInput(await _unknown(store, flow)) from None
        saved = await register_edited(store, flow, edits) if save else None
        return report, saved
    finally:
        await store.close()


async def _unknown(store: Store, flow: str) -> str:
    ids = sorted({v.flow_id for v in await store.flow_versions()})
    known = f" (flows: {', '.join(ids)})" if ids else "; register one with: flowtide flows register"
    return f"no flow {flow!r} in the store{known}"


@contextmanager
def _progress() -> Iterator[Told | None]:
    """A progress bar on stderr when it is a terminal (else nothing)."""
    if not err.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("playing runs again"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("runs", total=None)

        def told(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield told


def _print(report: WhatIfReport) -> None:
    edits = ", ".join(f"{name}={json.dumps(value)}" for name, value in report.edits.items())
    out.print(
        f"[bold]{escape(report.flow_id)}[/] version {escape(report.version)}: "
        f"{len(report.compared)} of its last {report.taken} run(s) played again with "
        f"{escape(edits)}"
    )
    for line in report.lines():
        out.print(f"  {escape(line)}")
    for u in report.unreproduced:
        out.print(
            f"  [yellow]{escape(u.run_id)}[/]: recorded {escape(u.recorded)}, "
            f"played again {escape(u.replayed)}"
        )
    for s in report.skipped:
        out.print(f"  [dim]{escape(s.run_id)}[/]: not played again, {escape(s.reason)}")
    for o in report.outcomes:
        out.print(f"  {escape(o.run_id)}: {escape(o.before)} → {escape(o.after)}")
