"""A worker started before its database is up waits for it: it says so once, tries again with
growing pauses on its clock, and works once the store opens; a store that can never open as
named (refused credentials, an unknown kind of store) stops it at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from flowtide.cli.store_ready import FIRST_PAUSE, LONGEST_PAUSE, open_when_ready, pause_after
from flowtide.clock import VirtualClock
from flowtide.store import MemoryStore, StoreNotReady, StoreOpenError
from tests.postgres_schemas import Schemas

ROOT = Path(__file__).resolve().parents[2]


class LateStore(MemoryStore):
    """A store whose database comes up after ``late`` tries (each seen at the clock's time)."""

    def __init__(self, clock: VirtualClock, late: int, error: StoreOpenError | None = None):
        super().__init__()
        self.clock = clock
        self.late = late
        self.error = error or StoreNotReady("cannot open the database 'db1': not up yet")
        self.tries: list[datetime] = []
        self.closed = False

    async def open(self) -> None:
        self.tries.append(self.clock.now())
        if len(self.tries) <= self.late:
            raise self.error
        await super().open()

    async def close(self) -> None:
        self.closed = True
        await super().close()


def test_pauses_double_up_to_the_longest() -> None:
    pauses = [pause_after(n) for n in range(1, 10)]
    assert pauses[:4] == [FIRST_PAUSE, FIRST_PAUSE * 2, FIRST_PAUSE * 4, FIRST_PAUSE * 8]
    assert pauses[-1] == LONGEST_PAUSE and max(pauses) == LONGEST_PAUSE
    assert pause_after(10_000) == LONGEST_PAUSE


async def test_a_store_not_ready_is_tried_again_on_the_clock_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    start = clock.now()
    store = LateStore(clock, late=9)
    with caplog.at_level(logging.INFO, logger="flowtide.worker"):
        opening = asyncio.create_task(open_when_ready(store, "postgresql://app@db1/runs", clock))
        await clock.run_until_idle()
        assert await opening is store
    assert store.tries == tries_within(start, store.tries[-1] - start)
    assert len(store.tries) == 10
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "store postgresql://app@db1/runs is not ready (cannot open the database 'db1': not up "
        "yet): trying again until it opens (Ctrl-C to stop)"
    ]
    assert "store postgresql://app@db1/runs open after 10 tries" in caplog.text
    assert not store.closed


async def test_a_store_that_can_never_open_fails_at_once() -> None:
    clock = VirtualClock()
    refused = StoreOpenError("cannot open the database 'db1': the server refused these credentials")
    store = LateStore(clock, late=1, error=refused)
    with pytest.raises(StoreOpenError) as raised:
        await open_when_ready(store, "db1", clock)
    assert raised.value is refused
    assert len(store.tries) == 1 and clock.next_timer() is None and store.closed


async def test_a_worker_stopped_while_it_waits_closes_the_store() -> None:
    clock = VirtualClock()
    store = LateStore(clock, late=1_000_000)
    opening = asyncio.create_task(open_when_ready(store, "db1", clock))
    await clock.advance(timedelta(minutes=10))
    opening.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await opening
    assert store.closed and clock.next_timer() is None
    assert store.tries == tries_within(clock.now() - timedelta(minutes=10), timedelta(minutes=10))


def tries_within(start: datetime, span: timedelta) -> list[datetime]:
    """When a store never ready is tried in ``span`` from ``start``: at once, then after each
    pause."""
    tries = [start]
    while tries[-1] + pause_after(len(tries)) <= start + span:
        tries.append(tries[-1] + pause_after(len(tries)))
    return tries


# -- a worker process, its database up later ------------


@contextlib.contextmanager
def relay_to(
    target: tuple[str, int], port: int, passed: int | None = None
) -> Iterator[list[socket.socket]]:
    """Connections to 127.0.0.1:``port`` passed on to ``target`` (the database, up now); with
    ``passed``, only that many, the later ones held unanswered (a server that stalls). Gives
    the connections accepted so far."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.05)  # (to see ``stopping`` between connections)
    stopping = threading.Event()
    opened: list[socket.socket] = []
    accepted: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            client.settimeout(None)
            opened.append(client)
            accepted.append(client)
            if passed is not None and len(accepted) > passed:
                continue  # (held: never answered)
            with contextlib.suppress(OSError):
                server = socket.create_connection(target)
                opened.append(server)
                for a, b in ((client, server), (server, client)):
                    threads.append(threading.Thread(target=pump, args=(a, b)))
                    threads[-1].start()

    serving = threading.Thread(target=serve)
    serving.start()
    try:
        yield accepted
    finally:
        stopping.set()
        serving.join()
        listener.close()
        for each in opened:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join()
        for each in opened:
            each.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def until(check: Callable[[], bool], what: str, patience: float = 30.0) -> None:
    end = time.monotonic() + patience
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {patience} s")
        time.sleep(0.02)


def test_a_worker_waits_for_its_database_to_come_up(schemas: Schemas, tmp_path: Path) -> None:
    server = conninfo_to_dict(schemas.url)
    target = (str(server.get("host") or "127.0.0.1"), int(server.get("port") or 5432))
    port = free_port()
    given = make_conninfo(schemas.url, host="127.0.0.1", port=port, password="hunter2")
    url = f"{given} schema={schemas.new()}"
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--store", url],
            stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
    try:
        until(lambda: "trying again" in log.read_text(), "the worker says it waits")
        assert process.poll() is None, log.read_text()
        with relay_to(target, port):
            until(lambda: "taking runs" in log.read_text(), "the worker takes runs")
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    assert text.count("is not ready") == 1, text
    assert f"port={port}" in text and "password=***" in text and "hunter2" not in text
    assert "the server cannot be reached" in text


def test_a_worker_stopped_before_its_database_is_up_exits_quietly(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--store", url],
            stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
    try:
        until(lambda: "trying again" in log.read_text(), "the worker says it waits")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert "SIGTERM: stopped before the store opened" in log.read_text()


def test_a_worker_stopped_while_its_database_stalls_exits(schemas: Schemas, tmp_path: Path) -> None:
    """The schema is brought up to date on a first connection, then the server answers no
    other: stopped while it waits for its connections, the worker leaves none trying."""
    server = conninfo_to_dict(schemas.url)
    target = (str(server.get("host") or "127.0.0.1"), int(server.get("port") or 5432))
    port = free_port()
    url = f"{make_conninfo(schemas.url, host='127.0.0.1', port=port)} schema={schemas.new()}"
    log = tmp_path / "worker.log"
    with relay_to(target, port, passed=1) as accepted, log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--store", url],
            stdout=output, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
        try:
            until(lambda: len(accepted) >= 2, "the worker waits for its pool's connections")
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "SIGTERM: stopped before the store opened" in log.read_text()
