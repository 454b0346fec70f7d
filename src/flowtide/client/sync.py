"""The synchronous client, for code that is not async (a Django or Flask handler): the
:class:`~flowtide.client.aio.AsyncClient`'s methods, run on an event loop of its own in a
background thread. Any number of threads may call one client at once; each call blocks its
caller until it is answered."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from flowtide.client.aio import AsyncClient, Deadline
from flowtide.client.registration import FlowSource
from flowtide.client.results import RegisteredFlow, RunSummary
from flowtide.clock import Clock
from flowtide.engine.handles import SignalReceipt
from flowtide.engine.result import RunResult
from flowtide.engine.timing.explain import Explanation
from flowtide.model.flow import Flow
from flowtide.store.base import EventRecord, Store, StoredFlowVersion
from flowtide.store.urls import a_store

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """A client of the runs and flows in one store, for synchronous code::

        client = flowtide.Client("postgresql://app@db/shop")
        run_id = client.start("urn:shop:flow:checkout", {"order": 42})

    ``store``: the store's URL (opened on first use, closed by :meth:`close`) or a store
    (opened on the client's own event loop if it is not yet, and not closed by the client).
    ``clock`` and ``poll``: as for :class:`~flowtide.client.aio.AsyncClient`. Every method is
    the async client's, blocking until answered. Use it as a context manager, or call
    :meth:`close` at the end (a client left open is stopped when the process exits).
    """

    def __init__(
        self, store: str | Store, *, clock: Clock | None = None, poll: float = 1.0
    ) -> None:
        if not isinstance(store, str):
            store = a_store(store, "Client()")
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="flowtide-client", daemon=True
        )
        self._thread.start()
        self._closed = False

        async def make() -> AsyncClient:
            return AsyncClient(store, clock=clock, poll=poll)

        try:
            self._client = self._call(make())
        except BaseException:  # (a URL that names no store: no thread is left behind)
            self._stop()
            raise

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the client's loop; its result (or its error) here."""
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError("a Client cannot be called from its own event loop's thread")
        with self._lock:
            if self._closed:
                work.close()
                raise RuntimeError("this client is closed")
            future = asyncio.run_coroutine_threadsafe(work, self._loop)
        return future.result()

    # -- runs ------------

    def start(
        self,
        flow: str | Flow,
        input: Mapping[str, Any] | None = None,
        *,
        deadline: Deadline = None,
        run_id: str | None = None,
        entrypoint: str | None = None,
    ) -> str:
        """See :meth:`AsyncClient.start`."""
        return self._call(
            self._client.start(flow, input, deadline=deadline, run_id=run_id, entrypoint=entrypoint)
        )

    def signal(
        self,
        run_id: str | None = None,
        *,
        placement: str | None = None,
        key: str | None = None,
        token_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        output: str | None = None,
        idempotency_key: str | None = None,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> SignalReceipt:
        """See :meth:`AsyncClient.signal`."""
        return self._call(
            self._client.signal(
                run_id,
                placement=placement,
                key=key,
                token_id=token_id,
                payload=payload,
                output=output,
                idempotency_key=idempotency_key,
                wait=wait,
                sender=sender,
            )
        )

    def cancel(
        self,
        run_id: str,
        reason: str | None = None,
        *,
        wait: float | None = 10.0,
        sender: str | None = None,
    ) -> bool:
        """See :meth:`AsyncClient.cancel`."""
        return self._call(self._client.cancel(run_id, reason, wait=wait, sender=sender))

    def explain_run(self, run_id: str) -> list[Explanation]:
        """See :meth:`AsyncClient.explain_run`."""
        return self._call(self._client.explain_run(run_id))

    def get(self, run_id: str) -> RunResult:
        """See :meth:`AsyncClient.get`."""
        return self._call(self._client.get(run_id))

    def wait(self, run_id: str, timeout: float | None = None) -> RunResult:
        """See :meth:`AsyncClient.wait`."""
        return self._call(self._client.wait(run_id, timeout))

    def runs(
        self, *, lifecycle: str | None = None, flow_id: str | None = None, limit: int | None = 50
    ) -> list[RunSummary]:
        """See :meth:`AsyncClient.runs`."""
        return self._call(self._client.runs(lifecycle=lifecycle, flow_id=flow_id, limit=limit))

    def history(self, run_id: str) -> list[EventRecord]:
        """See :meth:`AsyncClient.history`."""
        return self._call(self._client.history(run_id))

    def explain(
        self, run_id: str, placement: str | None = None, *, token_id: str | None = None
    ) -> Explanation:
        """See :meth:`AsyncClient.explain`."""
        return self._call(self._client.explain(run_id, placement, token_id=token_id))

    # -- flows ------------

    def flows(self, flow_id: str | None = None) -> list[StoredFlowVersion]:
        """See :meth:`AsyncClient.flows`."""
        return self._call(self._client.flows(flow_id))

    def register(self, *flows: FlowSource) -> list[RegisteredFlow]:
        """See :meth:`AsyncClient.register`."""
        return self._call(self._client.register(*flows))

    # -- the end ------------

    def close(self) -> None:
        """Close the client and stop its thread (calls under way are answered first); closing
        again does nothing."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a Client cannot be closed from its own event loop's thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result()
        finally:
            self._stop()

    def _stop(self) -> None:
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
