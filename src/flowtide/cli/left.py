"""What ``flowtide run`` says of a run it stopped waiting for (Ctrl-C, SIGTERM): where the run is,
whether the store keeps it, and how it goes on from there."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.markup import escape

from flowtide.cli.common import err
from flowtide.cli.stores import emit_json, relative, shown_store, store_note, store_option
from flowtide.engine.run.children import open_parks
from flowtide.store.base import (
    ENDED_LIFECYCLES,
    LIVE_TOKEN_STATUSES,
    ParkRecord,
    RunRecord,
    Store,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)
from flowtide.store.memory import MemoryStore


@dataclass(frozen=True)
class Left:
    """A run as the store holds it once ``flowtide run`` has let go of it."""

    run_id: str
    kept: bool
    """False: the store keeps nothing once the command ends (``memory:``)."""
    run: RunRecord | None = None
    """None: the run was never stored."""
    tokens: Sequence[TokenRecord] = ()
    parks: Sequence[ParkRecord] = field(default_factory=list)


async def left_in(store: Store, run_id: str) -> Left:
    """Where run ``run_id`` is in ``store`` (read after the engine let go of it)."""
    kept = not isinstance(store, MemoryStore)
    try:
        run = await store.get_run(run_id)
    except UnknownRunError:
        return Left(run_id, kept)
    tokens = await store.tokens(run_id, LIVE_TOKEN_STATUSES)
    return Left(run_id, kept, run, tokens, await open_parks(store, run_id))


def tell(left: Left, nodes: Sequence[str], url: str, as_json: bool) -> None:
    """Say where the run was left (on stderr; with ``as_json``, also as JSON on stdout)."""
    if as_json:
        emit_json(_as_json(left, url))
    for line in _lines(left, nodes, url):
        err.print(line)


def _as_json(left: Left, url: str) -> dict[str, Any]:
    return {
        "run_id": left.run_id,
        "stored": left.run is not None,
        "kept": left.kept and left.run is not None,
        "store": shown_store(url),
        "lifecycle": left.run.lifecycle if left.run is not None else None,
        "tokens": [{"placement": t.placement, "status": t.status.value} for t in left.tokens],
        "parked": [
            {"run_id": p.run_id, "placement": p.placement, "key": p.key, "deadline": p.deadline}
            for p in left.parks
        ],
    }


def _lines(left: Left, nodes: Sequence[str], url: str) -> list[str]:
    run_id = escape(left.run_id)
    if left.run is None:
        return [f"stopped before run {run_id} was stored: nothing is kept"]
    if not left.kept:
        return [
            f"stopped: run {run_id} is lost ({escape(left.run.lifecycle)}): a memory: store "
            "keeps nothing once the command ends",
            "  to keep runs, name a store with --store (sqlite:///runs.db, postgresql://...)",
        ]
    where = store_option(url)
    see = f"  see it: flowtide show {escape(left.run_id + where)}"
    if left.run.lifecycle in ENDED_LIFECYCLES:
        return [f"stopped: run {run_id} has ended ({escape(left.run.lifecycle)})", see]
    worker = "flowtide worker" + "".join(f" --nodes {shlex.quote(n)}" for n in nodes) + where
    lines = [
        f"stopped waiting: run {run_id} is kept in {escape(shown_store(url))}, "
        f"{escape(left.run.lifecycle)}; no process drives it now"
    ]
    lines += [
        f"  {escape(_token_line(t))}" for t in left.tokens if t.status is not TokenStatus.PARKED
    ]
    now = datetime.now(UTC)
    for p in left.parks:
        key = f" (key {p.key})" if p.key else ""
        ends = f", window ends {relative(p.deadline, now)}" if p.deadline else ""
        lines.append(f"  parked at {escape(p.placement + key + ends)}")
    if left.parks:
        first = left.parks[0]
        lines.append(f"  signal it: flowtide signal {escape(signal_address(first) + where)}")
        ends = " or its window ends" if any(p.deadline for p in left.parks) else ""
        lines.append(f"  a worker moves it on once it is signalled{ends}: {escape(worker)}")
    else:
        lines.append(f"  a worker goes on with it at once: {escape(worker)}")
    lines.append(see)
    note = store_note(url)
    return [*lines, f"  {escape(note)}"] if note is not None else lines


def signal_address(park: ParkRecord) -> str:
    """How ``flowtide signal`` names ``park``, quoted for a shell: by its key, else by its run
    and placement."""
    if park.key:
        return f"--key {shlex.quote(park.key)}"
    return f"{park.run_id} --placement {shlex.quote(park.placement)}"


def _token_line(token: TokenRecord) -> str:
    if token.status is TokenStatus.RUNNING:
        return (
            f"at {token.placement}: running; a node that was running here was stopped, and runs "
            "again from its start on the worker that takes the run"
        )
    if token.status is TokenStatus.WAITING and token.due is not None:
        return f"at {token.placement}: waiting, due {relative(token.due, datetime.now(UTC))}"
    return f"at {token.placement}: {token.status.value}"
