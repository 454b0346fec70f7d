"""What needs the server itself: the event stream of a run (served by uvicorn on a loopback
port), callback URLs that resume one park once, and the operations endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from flowtide.server.callbacks import callback_token, read_callback_token
from flowtide.store import MemoryStore, StoreError
from flowtide.store.base import WorkerRecord
from tests.server.serving import WRITE, serving
from tests.server.test_runs_api import parked, start

pytestmark = pytest.mark.usefixtures("every_store")


@asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a free loopback port (its lifespan is the caller's)."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(1000):  # (uvicorn says it has started by a flag only)
        if server.started:
            break
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def read_events(response: httpx.Response, until: str) -> list[dict[str, Any]]:
    """The SSE messages of ``response`` up to the first of kind ``until``."""
    found: list[dict[str, Any]] = []
    message: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if line.startswith(("event: ", "id: ", "data: ")):
            field, _, value = line.partition(": ")
            message[field] = json.loads(value) if field == "data" else value
        elif not line and message:
            found.append(message)
            if message["event"] == until:
                return found
            message = {}
    return found


async def test_the_event_stream_delivers_a_runs_events_from_now_on() -> None:
    async with serving(worker=True) as (http, app), served(app) as url:
        run = await start(http, "e-1")
        await parked(http, run)
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as live,
            live.stream("GET", "/api/events", params={"run": run}) as stream,
        ):
            assert stream.headers["content-type"].startswith("text/event-stream")
            signalled = await http.post(
                f"/api/runs/{run}/signals",
                json={"placement": "review", "output": "approved"},
                headers=WRITE,
            )
            assert signalled.status_code == 200
            events = await read_events(stream, "run_finished")
        kinds = [e["event"] for e in events]
        assert kinds[0] == "signalled" and kinds[-1] == "run_finished"  # (from now on)
        assert all(e["data"]["run_id"] == run for e in events)
        assert events[0]["id"] == f"{run}:{events[0]['data']['seq']}"
        # Last-Event-ID: the events after it, then the stream of an ended run ends.
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as live,
            live.stream(
                "GET", "/api/events", params={"run": run}, headers={"Last-Event-ID": f"{run}:1"}
            ) as again,
        ):
            replayed = await read_events(again, "run_finished")
        assert replayed[0]["data"]["seq"] == 2 and replayed[-1]["event"] == "run_finished"


async def test_the_event_stream_of_every_run_carries_new_runs_too() -> None:
    async with serving(worker=True) as (http, app), served(app) as url:
        before = await start(http, "e-2")
        await parked(http, before)
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as live,
            live.stream("GET", "/api/events") as stream,
        ):
            run = await start(http, "e-3")
            events = await read_events(stream, "parked")
        assert {e["data"]["run_id"] for e in events} == {run}  # (not the one before: from now)
        assert events[0]["event"] == "run_started"


async def test_a_callback_url_resumes_its_park_once_then_410() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "c-1")
        await parked(http, run)
        made = await http.post(
            f"/api/runs/{run}/callbacks",
            json={"placement": "review", "output": "approved"},
            headers=WRITE,
        )
        assert made.status_code == 201, made.text
        url = made.json()["url"]
        assert url.startswith("http://api/callbacks/") and "=" not in url.rsplit("/", 1)[1]
        forged = url[:-3] + ("AAA" if not url.endswith("AAA") else "BBB")
        assert (await http.get(forged)).status_code == 404
        first = await http.post(url, json={"note": "paid"})
        assert first.status_code == 200, first.text
        assert first.json()["accepted"] is True
        assert (await http.get(url)).status_code == 410
        assert (await http.post(url)).status_code == 410
        shown = (await http.get(f"/api/runs/{run}")).json()
        assert shown["state"]["note"] == "paid"
        assert shown["lifecycle"] in ("running", "completed")


async def test_callback_tokens_are_signed() -> None:
    token = callback_token(b"key", "run-1", "tok#1", "approved")
    assert read_callback_token(b"key", token) == ("run-1", "tok#1", "approved")
    assert read_callback_token(b"other", token) is None
    assert read_callback_token(b"key", token + "x") is None
    assert read_callback_token(b"key", "no-dot") is None


async def test_health_readiness_and_metrics() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "m-1")
        await parked(http, run)
        assert (await http.get("/healthz")).json() == {"ok": True}
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"store": True, "worker": True}
        text = (await http.get("/metrics")).text
        assert 'flowtide_runs{lifecycle="parked"} 1.0' in text
        assert "flowtide_requests_pending 0.0" in text
        assert 'flowtide_worker_events_total{kind="parked"}' in text
        assert 'flowtide_worker_attempt_seconds_count{outcome="parked"} 1.0' in text
        # What the worker's engine measures of itself.
        assert "flowtide_commit_seconds_count" in text
        assert "flowtide_sweeper_lateness_seconds_bucket" in text
        assert "flowtide_lease_takeovers_total 0.0" in text
        assert 'flowtide_http_requests_total{route="/api/runs",status="201"} 1.0' in text
    async with serving(register=False) as (http, _):
        assert (await http.get("/readyz")).json() == {"store": True, "worker": None}


class _Down(MemoryStore):
    """A store that stops answering once ``down`` is set."""

    down = False

    async def workers(self) -> Sequence[WorkerRecord]:
        if self.down:
            raise StoreError("the store is down")
        return await super().workers()


async def test_readiness_is_503_while_the_store_does_not_answer() -> None:
    store = _Down()
    async with serving(store=store, register=False) as (http, _):
        assert (await http.get("/readyz")).status_code == 200
        store.down = True
        answer = await http.get("/readyz")
        assert answer.status_code == 503 and answer.json() == {"store": False, "worker": None}
        assert (await http.get("/healthz")).status_code == 200
