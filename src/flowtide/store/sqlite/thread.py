"""The one thread a SQLite store's connection is used from.

Jobs are run there one at a time, in the order they were given, from a plain queue; the thread
is started by the first job. A job's answer goes back to the event loop with no futures between
the threads (:class:`flowtide.threads.Reply`): answers given before the loop takes them (a group
of writes) share one wake-up of the loop.

The thread is a daemon, so a store that was never closed does not keep its process alive; at
the interpreter's exit the job under way is still finished (a transaction is not left half-way
by the store's own thread), and the jobs queued after it are dropped
(:func:`flowtide.threads.finish_at_exit`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import TypeVar

from flowtide.threads import Reply, finish_at_exit, finished

__all__ = ["StoreThread"]

T = TypeVar("T")

log = logging.getLogger("flowtide.store")


class StoreThread:
    """One thread, named ``name``, that runs the jobs given to it in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._stopping = False
        self._shut = False

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job()`` in the thread, after the jobs given before it (an error it raises is
        its own to report: the thread goes on). RuntimeError once the thread is shut down."""
        if self._shut:
            raise RuntimeError(f"the thread {self.name} is shut down")
        if self._thread is None:
            self._started()
        self._jobs.put(job)

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the thread, after the jobs given before it; its value (or its error)
        here. Given up (cancelled) before it started, it does not run."""
        reply: Reply[T] = Reply(asyncio.get_running_loop())

        def job() -> None:
            if not reply.set_running_or_notify_cancel():
                return
            try:
                value = fn()
            except BaseException as error:  # (handed back, as a future would)
                reply.set_exception(error)
            else:
                reply.set_result(value)

        self.post(job)
        return await reply.awaited

    def shutdown(self) -> None:
        """End the thread once the jobs given so far have run (it takes no more)."""
        self._shut = True
        if self._thread is not None:
            self._jobs.put(None)
        finished(self)

    def _started(self) -> None:
        with self._start:
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                thread.start()
                self._thread = thread
                finish_at_exit(self)

    def _work(self) -> None:
        while not self._stopping and (job := self._jobs.get()) is not None:
            try:
                job()
            except BaseException:  # (the thread must go on: later jobs wait for it)
                log.exception("a job of the SQLite store's thread failed")

    def finish(self) -> None:
        """(At the interpreter's exit.) Finish the job under way, drop the others, and end."""
        self._stopping = True
        thread = self._thread
        if thread is not None:
            self._jobs.put(None)
            thread.join()
