"""``/api/events``: the runs' history events as server-sent events, from now on (or after
``Last-Event-ID``), of one run or of every run.

The store has no feed across runs, so the stream looks again whenever the store may have
changed (at least every ``poll`` seconds): the events after the last one sent of each run that
is not over, and of each run that ended since the last look. Opening a stream reads no event of
a run that has ended (nothing more comes of it), and of a run that is not over only those after
its checkpoint (written when a worker lets go of it parked), to learn where "now" is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from flowtide.client.views import event_json
from flowtide.engine import Lifecycle
from flowtide.server.services import Services, services
from flowtide.store.base import EventRecord, RunRecord, Store

__all__ = ["Cursor", "router", "sse"]

router = APIRouter(tags=["events"])

KEEPALIVE = 15.0
"""Seconds between comments that keep an idle stream open through proxies."""


def sse(event: EventRecord) -> str:
    """One SSE message: ``event: <kind>``, ``id: <run>:<seq>``, ``data: <event JSON>``."""
    data = json.dumps(event_json(event), default=str, separators=(",", ":"))
    return f"event: {event.kind}\nid: {event.run_id}:{event.seq}\ndata: {data}\n\n"


class Cursor:
    """The last event sent of each run watched."""

    def __init__(self, store: Store, run_id: str | None) -> None:
        self.store = store
        self.run_id = run_id
        self.sent: dict[str, int] = {}
        self.ended: set[str] = set()

    async def start(self, last_event_id: str | None) -> None:
        """From now on: every watched run's last event counts as sent (but the one
        ``last_event_id`` names, whose events after it are sent)."""
        resumed, _, seq = (last_event_id or "").rpartition(":")
        for run in await self._runs():
            if run.id == resumed and seq.isdigit():
                self.sent[run.id] = int(seq)
            elif Lifecycle(run.lifecycle).terminal:
                self.ended.add(run.id)  # (nothing more comes of it: nothing read)
            else:
                self.sent[run.id] = await self._last_seq(run)

    async def _last_seq(self, run: RunRecord) -> int:
        """The number of the run's last event, read from its checkpoint on."""
        after = run.checkpoint.seq if run.checkpoint is not None else 0
        events = await self.store.history(run.id, after=after)
        return events[-1].seq if events else after

    async def _runs(self) -> list[RunRecord]:
        if self.run_id is not None:
            return [await self.store.get_run(self.run_id)]
        return list(await self.store.list_runs())

    async def new_events(self) -> list[EventRecord]:
        found: list[EventRecord] = []
        for run in await self._runs():
            if run.id in self.ended:
                continue
            events = list(await self.store.history(run.id, after=self.sent.get(run.id, 0)))
            if events:
                self.sent[run.id] = events[-1].seq
                found.extend(events)
            if Lifecycle(run.lifecycle).terminal:
                self.ended.add(run.id)  # (its last events are read: nothing more comes)
        return found


async def _stream(
    request: Request, store: Store, cursor: Cursor, poll: float
) -> AsyncIterator[str]:
    yield ": flowtide events\n\n"
    quiet = 0.0
    while not await request.is_disconnected():
        sent = False
        for event in await cursor.new_events():
            yield sse(event)
            sent = True
        if cursor.run_id is not None and cursor.run_id in cursor.ended:
            return
        quiet = 0.0 if sent else quiet + poll
        if quiet >= KEEPALIVE:
            quiet = 0.0
            yield ": keepalive\n\n"
        await store.wait_changed(poll)


@router.get(
    "/api/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    request: Request,
    found: Annotated[Services, Depends(services)],
    run: Annotated[str | None, Query(description="Only this run's events.")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Each history event, as it is committed, as a server-sent event (``event: <kind>``,
    ``data: <event JSON>``, ``id: <run_id>:<seq>``). A stream of one run ends with the run."""
    run_id = await found.run_id(run) if run is not None else None
    cursor = Cursor(found.store, run_id)
    await cursor.start(last_event_id)
    poll = found.extras.get("poll", 1.0)
    return StreamingResponse(
        _stream(request, found.store, cursor, poll),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
