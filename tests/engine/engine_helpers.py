"""Shared helpers for the engine tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from flowtide.clock import VirtualClock
from flowtide.engine import Engine
from flowtide.model import Flow
from flowtide.store import EventRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@asynccontextmanager
async def running(
    autojump: bool = True, *, clock: VirtualClock | None = None, **options: Any
) -> AsyncIterator[tuple[Engine, VirtualClock]]:
    if clock is None:
        clock = VirtualClock(T0, autojump=autojump)
    engine = Engine(clock=clock, **options)
    try:
        yield engine, clock
    finally:
        await engine.close()
        await clock.aclose()


def raw_flow(placements: Sequence[dict[str, Any]], **fields: Any) -> Flow:
    """A flow built from plain data, without the graph checks (for deliberately broken flows)."""
    data: dict[str, Any] = {"id": "urn:test:flow:raw", "placements": list(placements)}
    data.setdefault("entrypoints", {"main": placements[0]["id"]})
    data.update(fields)
    return Flow.model_validate(data)


def kinds(events: Sequence[EventRecord], *, placement: str | None = None) -> list[str]:
    return [e.kind for e in events if placement is None or e.placement == placement]


def of_kind(events: Sequence[EventRecord], kind: str) -> list[EventRecord]:
    return [e for e in events if e.kind == kind]
