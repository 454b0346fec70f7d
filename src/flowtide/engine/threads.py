"""The worker threads of sync nodes: a small pool owned by the engine.

``await pool.submit(fn, arg)`` runs ``fn(arg)`` in a worker thread and gives its result (or
raises its exception, with its traceback) on the event loop. What it spares, compared with
``loop.run_in_executor``: the concurrent future and its chaining to an asyncio future, the
executor's work item, one ``call_soon_threadsafe`` (and its write to the loop's self-pipe) per
result, and the wake-up of a worker per submission while one is already awake.

* **Workers** sleep on a wake-up of their own while idle (an ``eventfd`` where the platform has
  one: cheaper to wake than a lock here; else a lock). A submission appends the job to the pending
  deque and wakes an idle worker only when no worker is awake: an awake worker takes the next
  pending job itself before it goes idle. When more callbacks are ready in the same turn of the
  loop (the other branches of a split), or the caller said more submissions follow in this
  callback (``with pool.burst():``), the wake-up waits for the end of the turn. A burst of
  submissions therefore wakes one thread, once, which runs the jobs back to back, instead of a
  thread per job contending for the GIL.
* **No lock on the hand-off**: the deque and the idle list are changed by single calls (atomic
  under the GIL). A worker going idle appends itself to the idle list, then looks at the deque
  again: a job a submitter appended meanwhile (believing this worker awake) is taken back by the
  worker itself, unless a submitter already took the worker from the idle list, whose wake-up is
  then on its way. So a job is never left with every worker asleep, and a worker is woken only
  by the one who took it from the idle list.
* **Growth**: workers start lazily, one at a time, up to ``max_threads``. While jobs are pending,
  a check on the loop runs every millisecond; when no job started since the previous check, every
  awake worker is stuck in a long node, so it wakes (or starts) one worker per pending job, within
  the bound. A node that blocks for a long time thus never keeps the others from running.
* **Completions** go through one thread-safe deque per event loop (a port). The first result of a
  batch wakes the loop once (an ``eventfd`` the loop watches, where the platform has one, else
  ``call_soon_threadsafe``); the loop then resolves every result that arrived meanwhile in one
  callback. A worker posts a result as late as it can: after it took its next job, or registered
  itself idle, so that once the loop is woken the worker only has to block and the loop gets the
  GIL. A result whose future was cancelled meanwhile (the node's scope was cancelled) is dropped:
  a late result is never applied.
* **One loop turn per result**: the future :meth:`WorkerPool.submit` returns runs the callbacks
  added while it is pending (an awaiting task's wake-up) right when the port resolves it, instead
  of scheduling them for the next turn of the loop: a task awaiting a node's result resumes in the
  same callback that took the result, and the loop goes straight back to waiting. A carrier
  (:class:`flowtide.engine.eager.Carrier`) that is the first to wait on it is resumed directly,
  without a callback of its own. (A cancel schedules them as usual.)
* **The future is the job**: it carries the function, its argument and the port to the worker,
  and the result (or exception) back: the queues hold futures only.
* A job whose future is cancelled before a worker takes it does not run (as with an executor).
* :meth:`WorkerPool.close` stops the workers without waiting: idle ones exit at once, a busy one
  when its node returns (a node that never returns keeps its daemon thread, not the caller; one
  that does still delivers its result). Pending jobs are cancelled.
* The node runs in the worker thread's own context (``contextvars``), as with
  ``run_in_executor``: the caller's context is not copied.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self, TypeVar

if TYPE_CHECKING:
    from flowtide.engine.eager import Carrier

__all__ = ["PoolFuture", "WorkerPool"]

T = TypeVar("T")
A = TypeVar("A")

CHECK_INTERVAL = 0.001
"""Seconds between two checks for stuck workers while jobs are pending."""

_HAS_EVENTFD = hasattr(os, "eventfd")


_Callback = tuple[Callable[[Any], object], contextvars.Context | None]


class PoolFuture(asyncio.Future[T]):
    """A node's result: callbacks added while pending run when the pool resolves it (on the
    loop, in the callback that took the result), not one loop turn later. Made by
    :meth:`WorkerPool.submit` only (which sets its slots): it is also the job itself, queued
    for a worker and then posted back to the loop, so a job costs no tuples of its own."""

    __slots__ = ("_arg", "_carrier", "_direct", "_failed", "_fn", "_port", "_value")

    _fn: Callable[[Any], Any]
    _arg: Any
    _port: _Port
    _value: Any
    """The job's result, or its exception (``_failed``), set by the worker before it posts."""
    _failed: bool
    _direct: list[_Callback] | None
    _carrier: Carrier | None
    """A carrier waiting on this future (see :class:`~flowtide.engine.eager.Carrier`): the first
    waiter, resumed directly (its own step, in its context) when the future resolves."""

    def add_done_callback(
        self, fn: Callable[[Self], object], /, *, context: contextvars.Context | None = None
    ) -> None:
        if self.done():
            super().add_done_callback(fn, context=context)
            return
        if self._direct is None:
            self._direct = []
        self._direct.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Self], object], /) -> int:
        removed = super().remove_done_callback(fn)
        carrier = self._carrier
        if carrier is not None and fn == carrier._wakeup:
            self._carrier = None
            removed += 1
        if self._direct:
            kept = [cb for cb in self._direct if cb[0] != fn]
            removed += len(self._direct) - len(kept)
            self._direct = kept
        return removed

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        loop = self.get_loop()
        carrier, self._carrier = self._carrier, None
        if carrier is not None:
            loop.call_soon(carrier._wakeup, self, context=carrier.get_context())
        direct, self._direct = self._direct, None
        if direct:
            for fn, context in direct:
                loop.call_soon(fn, self, context=context)
        return True

    def _resolve(self) -> None:
        """On the loop: set the result (or exception) the worker left, then resume the carrier
        and run the pending callbacks now."""
        value, self._value = self._value, None
        failed = self._failed
        if failed:
            self.set_exception(_deliverable(value))
        else:
            self.set_result(value)
        del value
        carrier = self._carrier
        if carrier is not None:
            self._carrier = None
            try:
                # As its wake-up would (the coroutine reads the result where it awaits).
                if failed:
                    carrier._context.run(carrier._wakeup, self)
                else:
                    carrier._context.run(carrier.step)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._failed_callback(carrier._wakeup, exc)
        direct, self._direct = self._direct, None
        if not direct:
            return
        for fn, context in direct:
            try:
                if context is None:
                    fn(self)
                else:
                    context.run(fn, self)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._failed_callback(fn, exc)

    def _failed_callback(self, fn: Callable[..., object], exc: BaseException) -> None:
        # As asyncio's Handle does for a failing callback.
        self.get_loop().call_exception_handler(
            {"message": f"Exception in callback {fn!r}", "exception": exc, "future": self}
        )


class _Port:
    """Where workers post results for one event loop; the loop resolves them in batches."""

    __slots__ = ("_done", "_eventfd", "_fd", "_lock", "_signalled", "bursts", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, use_eventfd: bool) -> None:
        self.loop = loop
        self.bursts = 0  # open ``with pool.burst():`` blocks on this loop
        self._done: deque[PoolFuture[Any]] = deque()
        self._signalled = False
        self._lock = threading.Lock()  # a post's write against close()
        self._fd: int | None = None
        if use_eventfd:
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            try:
                loop.add_reader(fd, self._drain)
            except NotImplementedError:  # a loop that cannot watch file descriptors
                os.close(fd)
            else:
                self._fd = fd
        self._eventfd = self._fd is not None

    def post(self, fut: PoolFuture[Any]) -> None:
        """From a worker: the job of ``fut`` ended (its result or exception is on it)."""
        self._done.append(fut)
        if self._signalled:
            return  # the loop is woken already and will see this result
        self._signalled = True
        if self._eventfd:
            with self._lock:
                fd = self._fd
                if fd is not None:
                    os.eventfd_write(fd, 1)
                    return
            # Closed meanwhile: wake the loop the plain way.
        try:  # noqa: SIM105 (a plain try: this is on every batch's path)
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            pass  # a closed loop: nobody waits for the result any more

    def _drain(self) -> None:
        """On the loop: resolve every result posted so far."""
        if self._fd is not None:
            try:  # noqa: SIM105 (a plain try: this is on every batch's path)
                os.eventfd_read(self._fd)
            except BlockingIOError:
                pass  # a spurious wake-up
        # Reset before draining: a result posted from now on wakes the loop again.
        self._signalled = False
        done = self._done
        while done:
            fut = done.popleft()
            if fut.done():
                continue  # cancelled while the node ran: its late result is dropped
            fut._resolve()

    def close(self) -> None:
        """On the loop (or once it is closed): stop watching the eventfd. A node still running
        posts its result later through ``call_soon_threadsafe`` (as an executor's thread would
        deliver it after a shutdown), while the loop is open."""
        with self._lock:
            fd, self._fd = self._fd, None
            self._eventfd = False
        if fd is not None:
            if not self.loop.is_closed():
                self.loop.remove_reader(fd)
            os.close(fd)
        if self.loop.is_closed():
            self._done.clear()
        elif self._done or self._signalled:
            # A wake-up may have gone to the eventfd just closed: drain on the next turn.
            self._signalled = False
            self.loop.call_soon(self._drain)


class _Burst:
    __slots__ = ("_port",)

    def __init__(self, port: _Port) -> None:
        self._port = port

    def __enter__(self) -> None:
        self._port.bursts += 1

    def __exit__(self, *exc: object) -> None:
        self._port.bursts -= 1


def _deliverable(exc: BaseException) -> BaseException:
    # An asyncio future refuses StopIteration (it would end the awaiting coroutine silently).
    if isinstance(exc, StopIteration):
        err = RuntimeError(f"a sync node raised {type(exc).__name__}")
        err.__cause__ = exc
        return err
    return exc


class _Worker:
    """A worker thread's wake-up: :meth:`wake` from anywhere, :meth:`sleep` in the worker.
    Only the one who took the worker from the idle list wakes it, once per sleep."""

    __slots__ = ("_fd", "_lock", "thread")

    def __init__(self, use_eventfd: bool) -> None:
        self.thread: threading.Thread | None = None
        self._fd: int | None = None
        self._lock: threading.Lock | None = None
        if use_eventfd:
            self._fd = os.eventfd(0, os.EFD_CLOEXEC)
        else:
            self._lock = threading.Lock()
            self._lock.acquire()  # held while the worker sleeps; released to wake it

    def wake(self) -> None:
        if self._fd is not None:
            os.eventfd_write(self._fd, 1)
        else:
            assert self._lock is not None
            self._lock.release()

    def sleep(self) -> None:
        if self._fd is not None:
            os.eventfd_read(self._fd)
        else:
            assert self._lock is not None
            self._lock.acquire()

    def stopped(self) -> None:
        """In the worker, as it exits (nobody can wake it any more)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class WorkerPool:
    """Worker threads for sync nodes (see the module docstring)."""

    def __init__(
        self, max_threads: int, name: str = "flowtide-node", *, use_eventfd: bool = _HAS_EVENTFD
    ) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self.name = name
        self._use_eventfd = use_eventfd and _HAS_EVENTFD
        self._jobs: deque[PoolFuture[Any]] = deque()
        self._idle: list[_Worker] = []
        self._workers: list[_Worker] = []
        self._started = 0
        """Jobs taken by workers (the stuck check compares it; an increment lost to a race
        between workers still leaves it changed)."""
        self._closed = False
        self._flush = False  # a deferred wake-up is scheduled (see submit)
        self._ports: dict[asyncio.AbstractEventLoop, _Port] = {}
        self._last: tuple[asyncio.AbstractEventLoop, _Port] | None = None
        self._check: asyncio.TimerHandle | None = None
        self._check_loop: asyncio.AbstractEventLoop | None = None
        self._checked_at = 0

    # -- the loop's side ------------

    @property
    def threads(self) -> int:
        """How many worker threads were started."""
        return len(self._workers)

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(
        self, fn: Callable[[A], T], arg: A, loop: asyncio.AbstractEventLoop | None = None
    ) -> PoolFuture[T]:
        """Run ``fn(arg)`` in a worker; on the running loop, the future of its result.
        ``loop``: the running loop, when the caller knows it (saves asking asyncio).

        Cancelling the future before a worker takes the job means it never runs; after, the
        node goes on in its thread and its result is dropped.
        """
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        if loop is None:
            loop = asyncio.get_running_loop()
        last = self._last
        port = last[1] if last is not None and last[0] is loop else self._port(loop)
        fut: PoolFuture[T] = PoolFuture(loop=loop)
        fut._fn = fn
        fut._arg = arg
        fut._port = port
        fut._value = None
        fut._failed = False
        fut._direct = None
        fut._carrier = None
        self._jobs.append(fut)
        idle = self._idle
        if len(idle) == len(self._workers):
            # No worker is awake to see the job: wake an idle one, or start one. When more
            # callbacks are ready in this turn of the loop (the other branches of a split, about
            # to submit theirs), do it once after them: a worker woken now would take the GIL
            # (the wake-up's write releases it) to run this one job, and go back to sleep.
            if port.bursts or getattr(loop, "_ready", None):
                if not self._flush:
                    self._flush = True
                    loop.call_soon(self._wake_one, loop)
            else:
                self._wake_one(loop)
        elif self._check is None or self._check_loop is not loop:
            # An awake worker takes it next, unless it is stuck: check soon.
            self._arm(loop)
        return fut

    def burst(self) -> _Burst:
        """``with pool.burst():`` on the loop: more submissions follow in this callback, so a
        worker is woken once, at the end of the loop's turn, as when more callbacks are ready."""
        loop = asyncio.get_running_loop()
        last = self._last
        return _Burst(last[1] if last is not None and last[0] is loop else self._port(loop))

    def _wake_one(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake an idle worker (or start one) if no worker is awake to take the pending jobs."""
        self._flush = False
        if self._closed or not self._jobs:
            return
        idle = self._idle
        if len(idle) == len(self._workers):
            # Counted before the wake-up: the woken worker may take a job at once.
            more = len(self._jobs) > 1
            try:
                w = idle.pop()
            except IndexError:
                self._spawn()
            else:
                w.wake()
            if not more:
                return
        # More jobs than the one worker woken (or awake) takes at once: check it is not stuck.
        if self._check is None or self._check_loop is not loop:
            self._arm(loop)

    def _port(self, loop: asyncio.AbstractEventLoop) -> _Port:
        port = self._ports.get(loop)
        if port is None:
            for old in [lp for lp in self._ports if lp.is_closed()]:
                self._ports.pop(old).close()
            port = self._ports[loop] = _Port(loop, self._use_eventfd)
        self._last = (loop, port)
        return port

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Check for stuck workers in a while, on ``loop``."""
        if self._check is not None:
            self._check.cancel()
        self._checked_at = self._started
        self._check_loop = loop
        self._check = loop.call_later(CHECK_INTERVAL, self._check_stuck, loop)

    def _check_stuck(self, loop: asyncio.AbstractEventLoop) -> None:
        """While jobs are pending: if none started since the last check, every awake worker
        is busy with a long node: wake (or start) a worker per pending job, within the bound."""
        if self._check_loop is not loop:
            return  # re-armed on another loop meanwhile
        self._check = None
        if self._closed or not self._jobs:
            return
        if self._started == self._checked_at:
            idle = self._idle
            for _ in range(len(self._jobs)):
                try:
                    w = idle.pop()
                except IndexError:
                    if not self._spawn():
                        break
                else:
                    w.wake()
        self._arm(loop)

    def _spawn(self) -> bool:
        """Start a worker, awake, if the bound allows (False: it does not)."""
        if len(self._workers) >= self.max_threads:
            return False
        w = _Worker(self._use_eventfd)
        w.thread = threading.Thread(
            target=self._work,
            args=(w,),
            name=f"{self.name}_{len(self._workers)}",
            daemon=True,  # a node that never returns must not hold the process at exit
        )
        self._workers.append(w)
        w.thread.start()
        return True

    def close(self) -> None:
        """Stop the workers without waiting for busy ones; cancel the jobs not started."""
        if self._closed:
            return
        self._closed = True
        if self._check is not None:
            self._check.cancel()
            self._check = None
        idle = self._idle
        while idle:
            try:
                w = idle.pop()
            except IndexError:
                break  # the last one took itself back meanwhile (it sees the pool closed)
            w.wake()
        jobs = self._jobs
        while jobs:
            fut = jobs.popleft()
            _cancel(fut._port.loop, fut)
        for port in self._ports.values():
            port.close()
        self._ports.clear()
        self._last = None

    def shutdown(self, wait: bool = True) -> None:
        """:meth:`close`, then (``wait``) wait until every worker has stopped. Waiting blocks:
        call it from another thread than the loop's (``asyncio.to_thread``)."""
        self.close()
        if wait:
            for w in list(self._workers):
                if w.thread is not None and w.thread is not threading.current_thread():
                    w.thread.join()

    # -- the workers' side ------------

    def _work(self, w: _Worker) -> None:
        jobs = self._jobs
        popleft = jobs.popleft
        idle = self._idle
        # The previous job, its result on it, posted before the next job runs or before this
        # worker sleeps: once the loop is woken, this thread only has to block.
        done: PoolFuture[Any] | None = None
        while True:
            if self._closed:
                if done is not None:
                    done._port.post(done)
                w.stopped()
                return
            try:
                fut = popleft()
            except IndexError:
                idle.append(w)
                if jobs or self._closed:
                    # A submitter may have seen this worker awake: take itself back, unless one
                    # took it from the idle list already (its wake-up is then on its way).
                    try:
                        idle.remove(w)
                    except ValueError:
                        pass
                    else:
                        continue
                if done is not None:
                    done._port.post(done)
                    done = None
                w.sleep()
                continue
            self._started += 1
            if done is not None:
                done._port.post(done)
                done = None
            if fut.done():
                continue  # cancelled before it started: it does not run
            try:
                fut._value = fut._fn(fut._arg)
            except BaseException as exc:
                fut._value = exc
                fut._failed = True
                del exc  # the traceback holds this frame
            done = fut
            del fut


def _cancel(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any]) -> None:
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fut.cancel()
    else:
        loop.call_soon_threadsafe(fut.cancel)
