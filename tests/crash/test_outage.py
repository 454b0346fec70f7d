"""A PostgreSQL outage between a worker process and its database (a TCP proxy that resets
every connection and refuses new ones for a while): the worker says so in one line when it
starts and one when it ends, and the first notice after it is heard at once."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from flowtide.store import RunRecord
from flowtide.store.postgres import PostgresStore
from flowtide.store.urls import open_store
from tests.crash.proxy import Proxy
from tests.crash.test_skew import _host_and_port, _stop, healthy_worker, through
from tests.postgres_schemas import Schemas

OUTAGE = 4.0
"""Seconds the database is out of reach."""


async def _worker_through_an_outage(url: str, logs: Path) -> list[str]:
    """The lines a worker logs while its database goes away for :data:`OUTAGE` seconds and
    comes back."""
    log = logs / "worker.log"
    async with Proxy(*_host_and_port(url)) as proxy:
        worker = healthy_worker(through(url, proxy.port), log, logs / "starts")
        store = await open_store(url)
        try:
            async with store:
                for _ in range(200):  # (until the worker is at work)
                    if await store.workers():
                        break
                    await asyncio.sleep(0.05)
                proxy.cut()
                await asyncio.sleep(OUTAGE)
                proxy.restore()
                await asyncio.sleep(3)
        finally:
            await asyncio.to_thread(_stop, worker)
    return log.read_text().splitlines()


def test_an_outage_is_said_once_when_it_starts_and_once_when_it_ends(
    schemas: Schemas, tmp_path: Path
) -> None:
    url = f"{schemas.url}?schema={schemas.new()}"
    lines = asyncio.run(_worker_through_an_outage(url, tmp_path))
    assert len(lines) == 2, "\n".join(lines)
    assert "the database does not answer" in lines[0]
    assert "answers again" in lines[1]


async def test_the_first_notice_after_an_outage_is_heard_at_once(schemas: Schemas) -> None:
    schema = schemas.new()
    async with Proxy(*_host_and_port(schemas.url)) as proxy:
        proxied = PostgresStore(through(schemas.url, proxy.port), schema=schema)
        async with schemas.store(schema) as direct, proxied:
            await proxied.wait_changed(0.01)  # (listening from now on)
            proxy.cut()
            await proxied.wait_changed(0.5)  # (the connection lost: may end at once)
            asyncio.get_running_loop().call_later(1.0, proxy.restore)
            began = time.monotonic()
            assert await proxied.wait_changed(30) is True
            assert time.monotonic() - began < 5
            run = RunRecord("r", "urn:flowtide:test", "1", "pending", datetime.now(UTC))
            waiting = asyncio.ensure_future(proxied.wait_changed(30))
            await asyncio.sleep(0.2)
            await direct.create_run(run, {})
            assert await asyncio.wait_for(waiting, 5) is True
