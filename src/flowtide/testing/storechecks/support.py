"""What the store checks share: instants, records of a small run, assertions without pytest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    Lease,
    NodeAnchor,
    ParkRecord,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    Store,
    TokenRecord,
    TokenStatus,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FLOW = "urn:flowtide:store-check"


def on_given_instants(store: Store) -> None:
    """Let the instants the check gives decide leases and wakes, also on a store with a clock
    of its own (told to use them, as an engine on a virtual clock does): the checks' instants
    lie in the past of any real clock. That store's own clock is checked by its own tests."""
    store.own_clock = False


def at(seconds: float) -> datetime:
    """``seconds`` after :data:`T0`."""
    return T0 + timedelta(seconds=seconds)


def run_record(run_id: str, lifecycle: str = "running") -> RunRecord:
    return RunRecord(run_id, FLOW, "1", lifecycle, T0, options={"entrypoint": None})


async def new_run(
    store: Store, run_id: str = "r", state: dict[str, Any] | None = None, lifecycle: str = "running"
) -> RunRecord:
    """Create a run (with ``state``, by default ``{"n": 1}``) and return its record."""
    run = run_record(run_id, lifecycle)
    await store.create_run(run, {"n": 1} if state is None else state)
    return run


def token(
    run_id: str, number: int, status: TokenStatus = TokenStatus.RUNNING, **fields: Any
) -> TokenRecord:
    """Token ``<run id>.<number>`` at placement ``p<number>``."""
    return TokenRecord(f"{run_id}.{number}", run_id, f"p{number}", status, **fields)


def park(run_id: str, number: int, epoch: int = 1, **fields: Any) -> ParkRecord:
    """A park of token ``<run id>.<number>`` at its placement, at this epoch."""
    token_id = f"{run_id}.{number}"
    return ParkRecord(f"{token_id}#{epoch}", run_id, token_id, f"p{number}", 1, epoch, T0, **fields)


def every_part(run_id: str, suffix: str) -> Commit:
    """A commit that writes something in every part a commit has, each marked by ``suffix``."""
    run = run_record(run_id, f"lifecycle-{suffix}")
    return Commit(
        run_id,
        run=run,
        tokens=[token(run_id, 9, data={"by": suffix})],
        state={f"set-{suffix}": [suffix]},
        state_deleted=["n"],
        events=[EventRecord(f"event-{suffix}", run_id, at(1), data={"by": suffix})],
        due=[DueEntry(at(2), run_id, f"{run_id}.9", f"due-{suffix}")],
        due_cleared=[f"{run_id}.1"],
        due_dropped=[(f"{run_id}.2", "timeout")],
        anchors=[NodeAnchor(run_id, f"anchor-{suffix}", None, at(3))],
        anchors_released=[("kept", None)],
        scatter=[ScatterItemRecord(run_id, "each#9", 0, "done", suffix, [suffix])],
        parks=[park(run_id, 9, payload={"by": suffix})],
        signal_answers=[SignalAnswer(f"answer-{suffix}", run_id, {"by": suffix})],
    )


async def seeded_run(store: Store, run_id: str = "r") -> None:
    """A run with something in every part :func:`every_part` touches: tokens 1 and 2 (1 is
    running at epoch 1), due entries for both, an anchor ``kept``, an event, a park."""
    await new_run(store, run_id)
    await store.commit(
        Commit(
            run_id,
            tokens=[token(run_id, 1, epoch=1), token(run_id, 2, TokenStatus.PARKED)],
            events=[EventRecord("seeded", run_id, T0)],
            due=[
                DueEntry(at(50), run_id, f"{run_id}.1"),
                DueEntry(at(60), run_id, f"{run_id}.2", "timeout"),
            ],
            anchors=[NodeAnchor(run_id, "kept", None, T0)],
            parks=[park(run_id, 2)],
        )
    )


@dataclass
class Snapshot:
    """Everything a store says about one run."""

    run: RunRecord
    state: dict[str, Any]
    tokens: list[TokenRecord]
    history: list[EventRecord]
    parks: list[ParkRecord]
    anchors: list[NodeAnchor]
    scatter: list[ScatterItemRecord]
    due: list[DueEntry]
    lease: Lease | None
    next_wake: datetime | None


def same_snapshot(got: Snapshot, want: Snapshot, what: str) -> None:
    """:func:`same` for snapshots, naming the first part that differs."""
    for part in fields(Snapshot):
        same(getattr(got, part.name), getattr(want, part.name), f"{what}, {part.name}")


async def snapshot(store: Store, run_id: str = "r") -> Snapshot:
    return Snapshot(
        await store.get_run(run_id),
        await store.get_state(run_id),
        list(await store.tokens(run_id)),
        list(await store.history(run_id)),
        list(await store.parks(run_id=run_id)),
        sorted(await store.node_anchors(run_id), key=lambda a: (a.placement, a.item or "")),
        list(await store.scatter_items(run_id, "each#9")),
        list(await store.due_of(run_id)),
        await store.lease_of(run_id),
        await store.next_wake(),
    )


def same(got: Any, want: Any, what: str) -> None:
    """Fail (``AssertionError``) saying ``what`` unless ``got == want``."""
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, expected {want!r}")


def true(condition: bool, what: str) -> None:
    """Fail saying ``what`` unless ``condition``."""
    if not condition:
        raise AssertionError(what)


@dataclass
class Raised:
    """What :func:`raises` caught (set once the block raised as expected)."""

    error: BaseException | None = None


@contextmanager
def raises(kind: type[BaseException], what: str) -> Iterator[Raised]:
    """Fail saying ``what`` unless the block raises ``kind`` (another error goes through)."""
    caught = Raised()
    try:
        yield caught
    except kind as error:
        caught.error = error
        return
    raise AssertionError(f"{what}: {kind.__name__} was not raised")
