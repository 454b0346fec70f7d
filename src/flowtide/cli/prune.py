"""``flowtide prune``: delete ended runs, with their history, in batches."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

import typer

from flowtide.cli.common import BadInput, guarded, out
from flowtide.cli.stores import (
    DEFAULT,
    JsonOption,
    StoreOption,
    emit_json,
    opened,
    shown_store,
)
from flowtide.clock import Clock, SystemClock
from flowtide.model.durations import parse_duration
from flowtide.store.base import PRUNE_BATCH, Store


def parse_cutoff(text: str, clock: Clock) -> datetime:
    """``--ended-before``: a duration back from now (``P30D``, ``PT12H``) or an instant with a
    time zone."""
    try:
        duration = parse_duration(text)
    except ValueError as exc:
        reason = str(exc)
    else:
        try:
            return clock.now() - duration
        except OverflowError:
            raise BadInput(f"--ended-before {text!r}: the duration is too long") from None
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--ended-before {text!r}: {reason}; or an instant with a time zone, such as "
            "'2026-01-01T09:00:00Z'"
        ) from None
    if instant.tzinfo is None:
        raise BadInput(
            f"--ended-before {text!r}: an instant needs a time zone (such as 'Z' or '+01:00')"
        )
    return instant


@guarded
def prune(
    ended_before: Annotated[
        str,
        typer.Option(
            "--ended-before",
            metavar="DURATION",
            help="Prune the runs that ended at least this long ago (P30D, PT12H), or before "
            "this instant (2026-01-01T00:00:00Z).",
            show_default=False,
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the runs it would prune; delete nothing.")
    ] = False,
    batch: Annotated[
        int,
        typer.Option("--batch", min=1, help="Runs deleted per transaction."),
    ] = PRUNE_BATCH,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Delete the runs that ended before --ended-before, with everything of theirs (state,
    tokens, history, parks, signal answers...), a batch per transaction, and say how many.

    A run that has not ended is never pruned, nor a subflow's child whose parent has not
    ended; the flow documents stay. Exits 0 once done, 2 on bad input.
    """
    cutoff = parse_cutoff(ended_before, SystemClock())
    count = asyncio.run(_prune(store, cutoff, batch, dry_run))
    if json_output:
        emit_json({"runs": count, "deleted": not dry_run, "ended_before": cutoff})
        return
    runs = "run" if count == 1 else "runs"
    where = shown_store(store)
    when = cutoff.isoformat(timespec="seconds")
    if dry_run:
        out.print(f"would prune {count} {runs} of {where} that ended before {when}")
    else:
        out.print(f"pruned {count} {runs} of {where} that ended before {when}")


async def _prune(url: str, cutoff: datetime, batch: int, dry_run: bool) -> int:
    store = await opened(url, create=False)
    try:
        return await prune_all(store, cutoff, batch, dry_run)
    finally:
        await store.close()


async def prune_all(store: Store, cutoff: datetime, batch: int, dry_run: bool) -> int:
    """Prune (or with ``dry_run``, count) every run that may be pruned, a batch at a time.

    Pruning goes on until a batch finds nothing: a batch may be short because another prune
    holds some of its runs, and there may be more after them."""
    count, after = 0, ""
    while True:
        found = await store.prune_runs(cutoff, limit=batch, after=after, dry_run=dry_run)
        count += len(found)
        if not found or (dry_run and len(found) < batch):
            return count
        if dry_run:
            after = found[-1]
