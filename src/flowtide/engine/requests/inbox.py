"""Signals and cancels sent by an engine: applied by the engine itself when it holds the run,
else recorded in the store as requests (the run's inbox) for the worker that holds the run, or
the next one to take it, to apply.

Only the worker holding a run's lease changes the run (see :mod:`flowtide.engine.worker.leases`). A
worker that holds the run in memory applies a signal or a cancel at once; one that finds nobody
holding the run alive takes it (as its sweeper would) and applies it as its holder. Any other
engine (a client, or a worker while another live worker holds the run) never takes the run from
its holder: it writes a
:class:`~flowtide.store.SignalRequest` (``kind`` ``signal`` or ``cancel``) with
:meth:`Store.request_signal <flowtide.store.Store.request_signal>`, which stores it with a due
entry (purpose ``signal``) that makes the run due at once: its holder claims it again and
applies the request (see :meth:`Signals.answer_request
<flowtide.engine.run.executor.signals.Signals.answer_request>`); a run nobody holds is taken by
the next worker that claims it (a worker waiting for an answer takes the run once nobody holds
it alive). The sender waits up to ``wait`` seconds for the answer
and returns it (or raises the same :class:`SignalRefused`); unanswered by then, it raises
:class:`RequestPending`: the request stays recorded and is applied as it was sent when a worker
takes the run.

A signal request is judged at the instant the store recorded it (``requested_at``): a park
whose deadline comes after that instant takes it, even when it is applied after the deadline
(and the store does not let the deadline fire before the requests recorded before it). A run
that ends before answering refuses a signal as a late one; a cancel is then answered by how the
run ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine.errors import EngineError, RequestPending, SignalRefused
from flowtide.engine.handles import SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.requests._addressing import find_park
from flowtide.engine.requests._signals import receipt_of, refusal
from flowtide.engine.requests.answers import AnswerWatch
from flowtide.engine.run.executor.core import RunExecutor
from flowtide.engine.state.limits import check_size
from flowtide.store.base import (
    DuplicateSignal,
    ParkRecord,
    RunEndedError,
    SignalRequest,
    Store,
    StoreConflict,
)

__all__ = ["Signaller", "SignallerHost"]


class SignallerHost(Protocol):
    """What a :class:`Signaller` reads of its engine."""

    store: Store
    clock: Clock
    poll: float
    executes: bool
    max_value_bytes: int | None


class Signaller:
    """Sends an engine's signals and cancels (see the module's notes). ``held``: the executor
    of a run the engine holds in memory; ``discard``: drop a stale executor; ``take``: a
    worker's claim of a run nobody holds alive, rebuilt and its due entries fired (a request
    among them), as its sweeper would: its executor, if this worker holds the run now (for a
    signal or a cancel, ``take(run_id, True)``: rebuilt first when nobody holds it, the first
    commit that changes it taking its lease, see ``Commit.take``)."""

    def __init__(
        self,
        host: SignallerHost,
        *,
        held: Callable[[str], RunExecutor | None],
        discard: Callable[[RunExecutor], None],
        take: Callable[[str, bool], Awaitable[RunExecutor | None]],
    ) -> None:
        self._host = host
        self._held = held
        self._discard = discard
        self._take = take
        self._answers = AnswerWatch(host)

    def holding(self, run_id: str) -> RunExecutor | None:
        """The run's executor if this engine holds the run and may apply to it at once."""
        ex = self._held(run_id)
        if ex is None or ex.released or not self._host.executes:
            return None
        return ex

    async def cancel_here(
        self, run_id: str, reason: str | None, sender: str | None = None
    ) -> bool | None:
        """Cancel the run if this engine holds it, or (a worker) wakes it now that nobody holds
        it alive: whether it was cancelled (False: its end had come already); None: not here
        (a client, or another worker holds the run: see :meth:`cancel`).

        A run woken for it is rebuilt first (one read), the end's commit taking its lease (see
        ``Commit.take``): the cancel waits for that commit, and looks again if another actor
        moved the run first."""
        for _ in range(5):
            ex = self.holding(run_id)
            if ex is not None:
                return ex.ending.cancel(reason, sender)
            if not self._host.executes:
                return None
            ex = await self._take(run_id, True)
            if ex is None:
                return None
            woken = ex.lease is None and ex.taking is not None
            if not ex.ending.cancel(reason, sender):
                if woken:
                    ex.settler.maybe_drained()  # (let go of, as it was)
                return False
            if not woken or ex.finalizer is None:
                return True
            await asyncio.wait([ex.finalizer])  # (cancelled too if its view is dropped)
            if not ex.closed:
                return True
            # (Its view dropped: another actor moved the run first. Look again.)
        raise EngineError("cancel: the run kept changing under this cancel; try again")

    async def signal(
        self,
        run_id: str | None,
        placement: str | None,
        key: str | None,
        token_id: str | None,
        payload: Mapping[str, Any] | None,
        output: str | None,
        idempotency_key: str | None,
        wait: float | None,
        sender: str | None = None,
    ) -> SignalReceipt:
        """:meth:`Engine.signal <flowtide.engine.Engine.signal>`."""
        store, clock = self._host.store, self._host.clock
        duplicate = _Duplicate(store, idempotency_key)
        if not self._host.executes and (known := await duplicate.answer()) is not None:
            return known  # (a client asks first: no request written for a repeat)
        payload = dict(payload or {})
        check_size(payload, "signal payload", self._host.max_value_bytes)
        for _ in range(5):
            held = self.holding(run_id) if run_id is not None else None
            woken: RunExecutor | None = None
            first = held is None and key is None and self._host.executes
            if run_id is not None and first:
                # Rebuilt first (one read): the park is found in it.
                held = woken = await self._take(run_id, True)
            view = held.view if held is not None else None
            try:
                park = await find_park(store, view, clock.now(), run_id, placement, key, token_id)
            except BaseException as exc:
                if woken is not None:
                    woken.settler.maybe_drained()  # (refused: let go of, as it was)
                if isinstance(exc, SignalRefused) and (known := await duplicate.answer()):
                    return known  # (a repeat of a signal that moved the run on)
                raise
            ex = held if held is not None else self.holding(park.run_id)
            if ex is None and self._host.executes and not (first and park.run_id == run_id):
                ex = await self._take(park.run_id, True)
            # A request, or a run held here: a repeat is told before anything is tried. (A
            # run woken here is not asked first: its wake's commit refuses a repeat,
            # DuplicateSignal, and nothing of it is applied.)
            asks_first = ex is None or not _untaken(ex)
            if asks_first and (known := await duplicate.answer()) is not None:
                return known
            if ex is None:
                asked = {
                    "kind": "signal",
                    "placement": placement,
                    "key": key,
                    "token_id": token_id,
                    "payload": payload,
                    "output": output,
                    "idempotency_key": idempotency_key,
                    **({"sender": sender} if sender is not None else {}),
                }
                try:
                    answer = await self._request(park.run_id, asked, wait)
                except RunEndedError:
                    answer = None
                if answer is None:
                    raise await self._refusal(park)
                return receipt_of(answer)
            receipt = await self._apply(ex, park, payload, output, idempotency_key, sender)
            if receipt is not None:
                return receipt
        raise EngineError("signal: the run kept changing under this signal; try again")

    async def cancel(
        self, run_id: str, reason: str | None, wait: float | None, sender: str | None = None
    ) -> bool:
        """Cancel a run this engine does not hold: recorded as a request for its holder;
        whether it was cancelled (False: it had already ended)."""
        asked: dict[str, Any] = {"kind": "cancel", "reason": reason}
        if sender is not None:
            asked["sender"] = sender
        try:
            answer = await self._request(run_id, asked, wait)
        except RunEndedError:
            return False
        if answer is not None:
            return bool(answer.get("cancelled"))
        # Ended before a worker answered: cancelled by whatever ended it, or not at all.
        run = await self._host.store.get_run(run_id)
        return run.lifecycle == Lifecycle.CANCELLED

    async def _apply(
        self,
        ex: RunExecutor,
        park: ParkRecord,
        payload: dict[str, Any],
        output: str | None,
        idempotency_key: str | None,
        sender: str | None = None,
    ) -> SignalReceipt | None:
        """The signal applied by this engine, which holds the run (None: look again)."""
        if not ex.settler.pin():
            return None
        try:
            answer = await ex.signals.signal(
                park,
                payload=payload,
                output=output,
                idempotency_key=idempotency_key,
                sender=sender,
            )
            return SignalReceipt.from_answer(answer)
        except DuplicateSignal:
            # Another signal with its key was answered first (its commit refused whole): what
            # this step changed in memory is not the run's, which the store has as it was.
            self._discard(ex)
            assert idempotency_key is not None
            known = await self._host.store.signal_answer(idempotency_key)
            assert known is not None
            return SignalReceipt.from_answer(known.answer, duplicate=True)
        except StoreConflict:
            # Another process moved the token first: forget what we knew and look again.
            self._discard(ex)
            return None
        finally:
            ex.settler.unpin()

    async def _refusal(self, park: ParkRecord) -> SignalRefused:
        """Why a signal for ``park`` of a run that has ended is refused."""
        latest = await self._host.store.parks(run_id=park.run_id)
        stored = next((p for p in latest if p.id == park.id), park)
        return refusal(stored, self._host.clock.now())

    async def _request(
        self, run_id: str, asked: dict[str, Any], wait: float | None
    ) -> dict[str, Any] | None:
        """Record ``asked`` for the run's holder and wait up to ``wait`` seconds (None: no
        limit) for its answer; None if the run ended unanswered. Raises
        :class:`RequestPending` when unanswered in time, :class:`RunEndedError` if the run
        had ended before it could be recorded."""
        host = self._host
        store = host.store
        sent = SignalRequest(uuid.uuid4().hex, run_id, host.clock.now(), asked)
        request = await store.request_signal(sent)
        kind = request.kind
        # (The caller's patience, in real time: not an instant of the run, which a virtual clock
        # may carry past while the store answers.)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait if wait is not None else None
        with self._answers.watching(run_id, request.id) as maybe_answered:
            while True:
                maybe_answered.clear()
                if host.executes:
                    # A run nobody holds alive (its holder gave it back or died): this worker
                    # takes it, as its sweeper would, and applies the request itself.
                    await self._take(run_id, False)
                kept = await store.signal_request(request.id)
                if kept is not None and kept.answer is not None:
                    return kept.answer
                run = await store.get_run(run_id)
                if Lifecycle(run.lifecycle).terminal:
                    # Its due entries went with its end; answered just before, or not at all.
                    kept = await store.signal_request(request.id)
                    return kept.answer if kept is not None else None
                left = give_up - loop.time() if give_up is not None else None
                if left is not None and left <= 0:
                    raise RequestPending(run_id, request.id, kind, wait or 0)
                await self._until_answered(maybe_answered, left)

    async def _until_answered(self, maybe_answered: asyncio.Event, left: float | None) -> None:
        """Until the engine's watch of the store says the request may have been answered, or
        ``left`` seconds (None: no limit) have passed; a worker also looks every ``poll``
        seconds, to take the run if its holder has let it go."""
        self._answers.ensure()
        seconds = left
        if self._host.executes:
            seconds = self._host.poll if left is None else min(self._host.poll, left)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await maybe_answered.wait()


def _untaken(ex: RunExecutor) -> bool:
    """Whether ``ex`` was rebuilt here from a snapshot in which nobody held its run, and has
    not taken it yet (its first commit takes its lease, see ``Commit.take``)."""
    return ex.lease is None and ex.taking is not None


class _Duplicate:
    """The answer to an earlier signal with ``key`` (None: no key), read from the store at most
    once, when it is asked for."""

    def __init__(self, store: Store, key: str | None) -> None:
        self._store = store
        self._key = key

    async def answer(self) -> SignalReceipt | None:
        key, self._key = self._key, None
        if key is None:
            return None
        known = await self._store.signal_answer(key)
        return SignalReceipt.from_answer(known.answer, duplicate=True) if known else None
