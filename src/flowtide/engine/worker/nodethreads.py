"""The worker threads of sync nodes: long-lived threads, each call handed to one directly.

A call is handed to the thread that went idle last (its caches are warm and it may not have
gone to sleep yet), woken by a lock of its own; with none idle, a new thread is started up to
``size``, else the call waits in a plain queue for the next thread to finish. There are no
futures: the caller gives a ``done`` callback, called in the worker thread with the call's value
or its error once it has returned (or with ``CANCELLED`` if it never ran), so a call costs one
wake-up of the thread and whatever ``done`` does, nothing more.

A call that has started cannot be stopped (a sync node sees its cancellation flag); one that
has not can be withdrawn (:meth:`Call.cancel`). :meth:`NodeThreads.shutdown` withdraws the calls
still queued, wakes the idle threads to end, and lets the busy ones end once their call has
returned (its ``done`` is called as usual). The threads are daemons, so an engine that was never
closed does not keep its process alive; still, at the interpreter's exit every pool left open is
shut down and its busy threads are waited for (:func:`flowtide.threads.finish_at_exit`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from flowtide.threads import CANCELLED, Cancelled, finish_at_exit, finished

__all__ = ["CANCELLED", "Call", "Done", "NodeThreads"]

log = logging.getLogger("flowtide.engine")

Done = Callable[[Any, BaseException | Cancelled | None], None]
"""Called in a worker thread with a call's value and error (None if it returned;
:data:`CANCELLED` if it never ran: withdrawn, or its pool shut down)."""


class Call:
    """One call handed to the pool."""

    __slots__ = ("_done", "_fn", "_pool", "_started", "_withdrawn")

    def __init__(self, pool: NodeThreads, fn: Callable[[], Any], done: Done) -> None:
        self._pool = pool
        self._fn = fn
        self._done = done
        self._started = False
        self._withdrawn = False

    def cancel(self) -> bool:
        """Withdraw the call if it has not started: True if withdrawn (its ``done`` is then not
        called: the caller knows), False if it runs or has run."""
        with self._pool.lock:
            if self._started or self._withdrawn:
                return False
            self._withdrawn = True
            return True

    def run(self) -> tuple[Any, BaseException | None] | None:
        """In a worker thread: the call's value and error (None if it returned), or None if it
        was withdrawn."""
        with self._pool.lock:
            if self._withdrawn:
                return None
            self._started = True
        try:
            return self._fn(), None
        except BaseException as exc:  # (handed back, as a future would: the thread goes on)
            return None, exc

    def tell(self, value: Any, error: BaseException | Cancelled | None) -> None:
        """In a worker thread: ``done`` hears how the call ended (never raising out of here:
        the thread must go on)."""
        try:
            self._done(value, error)
        except Exception:
            log.exception("the worker thread's done callback failed")

    def drop(self) -> None:
        """The pool shut down before the call ran: its ``done`` hears so, unless withdrawn."""
        with self._pool.lock:
            if self._withdrawn or self._started:
                return
            self._withdrawn = True
        self.tell(None, CANCELLED)


class _Worker:
    """One thread: sleeps on its own lock while idle; ``call`` is what it runs when woken
    (None: end)."""

    __slots__ = ("call", "wake")

    def __init__(self) -> None:
        self.call: Call | None = None
        self.wake = threading.Lock()
        self.wake.acquire()  # (held: the thread blocks on it until handed a call)

    def handed(self) -> Call | None:
        """Sleep until handed a call (None: end)."""
        self.wake.acquire()
        call, self.call = self.call, None
        return call


class NodeThreads:
    """Up to ``size`` worker threads, named ``{name}-N``, started as calls need them."""

    def __init__(self, size: int, name: str = "flowtide-node") -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one thread, not {size}")
        self.size = size
        self.name = name
        self.lock = threading.Lock()
        self._idle: list[_Worker] = []  # (last idle last: handed the next call)
        self._queued: deque[Call] = deque()
        self._threads: set[threading.Thread] = set()
        self._started = 0
        self._closed = False
        finish_at_exit(self)

    @property
    def threads(self) -> int:
        """How many worker threads are alive now."""
        with self.lock:
            return len(self._threads)

    def start(self, fn: Callable[[], Any], done: Done) -> Call:
        """Run ``fn()`` in a worker thread, then ``done(value, error)`` there. RuntimeError once
        the pool is shut down."""
        call = Call(self, fn, done)
        with self.lock:
            if self._closed:
                raise RuntimeError("the worker threads are shut down")
            if self._idle:
                worker = self._idle.pop()
                worker.call = call
                worker.wake.release()
            elif len(self._threads) < self.size:
                self._spawn(call)
            else:
                self._queued.append(call)
        return call

    def shutdown(self, wait: bool = False) -> None:
        """Take no more calls; withdraw the queued ones (their ``done`` hears ``CANCELLED``);
        end the idle threads now and the busy ones once their call has returned. ``wait``:
        until every thread has ended."""
        with self.lock:
            self._closed = True
            queued, self._queued = list(self._queued), deque()
            idle, self._idle = self._idle, []
            threads = list(self._threads)
        finished(self)
        for call in queued:
            call.drop()
        for worker in idle:
            worker.call = None
            worker.wake.release()
        if wait:
            current = threading.current_thread()
            for thread in threads:
                if thread is not current:
                    thread.join()

    def finish(self) -> None:
        """(At the interpreter's exit.) Shut down, waiting for the busy threads (daemon threads
        would be cut off mid-call)."""
        self.shutdown(wait=True)

    def _spawn(self, first: Call) -> None:
        """(Under the lock.) A new thread, to run ``first`` and then what it is handed."""
        name = f"{self.name}-{self._started}"
        thread = threading.Thread(target=self._work, args=(first,), name=name, daemon=True)
        self._started += 1
        self._threads.add(thread)
        thread.start()

    def _work(self, call: Call | None) -> None:
        worker = _Worker()
        try:
            while call is not None:
                ended = call.run()
                # Idle (or given a queued call) before the caller hears: a call handed over as
                # soon as it hears finds this thread still awake.
                queued = self._after(worker)
                if ended is not None:
                    call.tell(*ended)
                call = worker.handed() if isinstance(queued, _Idle) else queued
        finally:
            with self.lock:
                self._threads.discard(threading.current_thread())

    def _after(self, worker: _Worker) -> Call | _Idle | None:
        """What the thread runs next: a queued call, else ``_IDLE`` (it is among the idle ones
        now), else None (the pool is shut down: end)."""
        with self.lock:
            if self._queued:
                return self._queued.popleft()
            if self._closed:
                return None
            self._idle.append(worker)
            return _IDLE


class _Idle:
    __slots__ = ()


_IDLE = _Idle()
