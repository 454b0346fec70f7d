"""Process isolation: run a sync node in a subprocess that is killed at its deadline.

The node must be importable (``module:attribute``); its context is sent to a fresh process
(``forkserver`` where available, else ``spawn``) and its answer comes back through a pipe. The
subprocess sees a :class:`ProcessContext`: the same fields as a node context, but no clock
(``now()`` is the wall clock) and never ``cancelled`` - at the deadline it is killed outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import Any

from flowtide.authoring.nodes import NodeImplementation, import_node
from flowtide.clock import Clock
from flowtide.engine.context import NodeContext
from flowtide.engine.timing.scope import Cancellation, CancelScope


class RemoteTraceback(Exception):
    """The traceback of a node's exception in its subprocess, as text: the cause of its
    :class:`RemoteNodeError`, so that the error's traceback shows where the node raised it."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


class RemoteNodeError(Exception):
    """An exception raised by a node in its subprocess (its type names are kept for retry_on)."""

    def __init__(self, type_name: str, message: str, mro: list[str]) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.remote_mro = tuple(mro)

    def __str__(self) -> str:
        return f"{self.type_name}: {self.args[0]}"


class ProcessDiedError(Exception):
    """The node's subprocess ended without answering."""


class ProcessContext:
    """The context of a node running in a subprocess."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.state: dict[str, Any] = data["state"]
        self.run_id: str = data["run_id"]
        self.placement: str = data["placement"]
        self.attempt: int = data["attempt"]
        self.visit: int = data["visit"]
        self.item: Any = data["item"]
        self.idempotency_key: str = data["idempotency_key"]
        self.cancelled = False

    def raise_if_cancelled(self) -> None:
        return None

    def now(self) -> datetime:
        return datetime.now(UTC)


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def child_main(ref: str, data: dict[str, Any], conn: Connection) -> None:
    """The subprocess: import the node, say it started, run it, send back the answer."""
    try:
        impl = import_node(ref)
        conn.send(("started", os.getpid()))
        ctx = ProcessContext(data)
        value = impl.fn(ctx)
        if asyncio.iscoroutine(value):
            value = asyncio.run(value)
        conn.send(("ok", value, ctx.state))
    except BaseException as exc:
        mro = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__]
        text = "".join(traceback.format_exception(exc))
        with contextlib.suppress(Exception):
            conn.send(("error", type(exc).__name__, str(exc), mro, text))
    finally:
        conn.close()


async def _readable(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


async def run_in_process(
    impl: NodeImplementation,
    ctx: NodeContext,
    scope: CancelScope,
    clock: Clock,
    on_started: Callable[[int], None],
) -> tuple[Any, dict[str, Any]]:
    """Run ``impl`` in a subprocess; returns (its return value, its final state)."""
    ref = impl.type.ref or impl.id
    mp = _context()
    receiver, sender = mp.Pipe(duplex=False)
    data = {
        "state": ctx.state,
        "run_id": ctx.run_id,
        "placement": ctx.placement,
        "attempt": ctx.attempt,
        "visit": ctx.visit,
        "item": ctx.item,
        "idempotency_key": ctx.idempotency_key,
    }
    proc = mp.Process(target=child_main, args=(ref, data, sender), daemon=True)
    with clock.hold():
        try:
            await asyncio.to_thread(proc.start)
            sender.close()

            def kill(_: Cancellation) -> None:
                with contextlib.suppress(Exception):
                    proc.kill()

            scope.on_cancel(kill)
            while True:
                await _readable(receiver)
                try:
                    msg = receiver.recv()
                except EOFError:
                    raise ProcessDiedError(
                        f"the subprocess of node {impl.id!r} exited with code {proc.exitcode} "
                        "without answering"
                    ) from None
                if msg[0] == "started":
                    on_started(msg[1])
                    continue
                if msg[0] == "ok":
                    return msg[1], msg[2]
                raise RemoteNodeError(msg[1], msg[2], msg[3]) from RemoteTraceback(msg[4])
        finally:
            if proc.is_alive():
                proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(proc.join, 10))
            receiver.close()
