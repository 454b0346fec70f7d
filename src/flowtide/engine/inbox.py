"""Signals sent by an engine: applied by the engine itself when it may drive the run, else sent
through the store to the engine that holds the run (its inbox).

A run is driven by the engine holding its lease (see :mod:`flowtide.engine.leases`). Taking the
run from a live holder to apply a signal would refuse that holder's commits and run its nodes in
flight again elsewhere. So, when another owner holds the run with a lease still alive, the
signal is written to the store as a :class:`~flowtide.store.SignalRequest`, with a due entry
(purpose ``signal``) that makes the run's wake instant come at once: the holder claims the run
again, applies the request as a signal sent to it, and commits the answer with the signal's step
(see :meth:`Parking.answer_request <flowtide.engine._parking.Parking.answer_request>`). The
sender waits for that answer and returns it, or raises the same :class:`SignalRefused`.

Whoever holds the run when the entry comes answers it: the holder, or whoever took the run over
after the holder died (the entry stays in the store until its answer is committed). The sender
takes the run itself once nobody live holds it (so a client's signal is answered even with no
worker about), and after :data:`PATIENCE_LEASES` lease terms without an answer from a live
holder (one that cannot get to it), it takes the run over as a signal did before the inbox:
the answer is then certain, and only a holder that kept the signal waiting that long has its
nodes in flight run again. A run that ends before the answer drops the entry: the signal is
refused as a late one is.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from flowtide.clock import Clock
from flowtide.engine._addressing import find_park
from flowtide.engine._executor import RunExecutor
from flowtide.engine._signals import receipt_of, refusal
from flowtide.engine.errors import EngineError, SignalRefused
from flowtide.engine.handles import SignalReceipt
from flowtide.engine.lifecycle import Lifecycle
from flowtide.engine.limits import check_size
from flowtide.printable import printable
from flowtide.store.base import (
    DuplicateSignal,
    Lease,
    ParkRecord,
    RunEndedError,
    SignalRequest,
    Store,
    StoreConflict,
    StoreError,
)

__all__ = ["PATIENCE_LEASES", "Signaller", "SignallerHost"]

log = logging.getLogger("flowtide.engine")

PATIENCE_LEASES = 2
"""How many lease terms (``lease_ttl``) a signal waits for the answer of the live worker that
holds its run before the sending engine takes the run over and applies the signal itself."""


class SignallerHost(Protocol):
    """What a :class:`Signaller` reads of its engine."""

    store: Store
    clock: Clock
    owner: str
    lease_ttl: timedelta
    poll: float
    max_value_bytes: int | None


class Signaller:
    """Sends an engine's signals (see the module's notes). ``held``: the executor of a run the
    engine holds in memory; ``executor``: the run's executor, rebuilt under a lease taken (what
    is due by then fired); ``fire``: fire what is due of a held run; ``discard``: drop a stale
    executor; ``let_out``: hand a run a client took back."""

    def __init__(
        self,
        host: SignallerHost,
        *,
        held: Callable[[str], RunExecutor | None],
        executor: Callable[[str, Lease, datetime], Awaitable[RunExecutor | None]],
        fire: Callable[[RunExecutor, datetime], Awaitable[int]],
        discard: Callable[[RunExecutor], None],
        let_out: Callable[[RunExecutor], Awaitable[None]],
    ) -> None:
        self._host = host
        self._held = held
        self._executor = executor
        self._fire = fire
        self._discard = discard
        self._let_out = let_out

    async def signal(
        self,
        run_id: str | None,
        placement: str | None,
        key: str | None,
        token_id: str | None,
        payload: Mapping[str, Any] | None,
        output: str | None,
        idempotency_key: str | None,
    ) -> SignalReceipt:
        """:meth:`Engine.signal <flowtide.engine.Engine.signal>`."""
        store, clock = self._host.store, self._host.clock
        if idempotency_key is not None:
            known = await store.signal_answer(idempotency_key)
            if known is not None:
                return SignalReceipt.from_answer(known.answer, duplicate=True)
        payload = dict(payload or {})
        check_size(payload, "signal payload", self._host.max_value_bytes)
        for _ in range(5):
            held = self._held(run_id) if run_id is not None else None
            park = await find_park(store, held, clock.now(), run_id, placement, key, token_id)
            ex = self._held(park.run_id)
            if ex is None or ex.released:
                now = clock.now()
                lease = await store.acquire_run(
                    park.run_id, self._host.owner, now, now + self._host.lease_ttl
                )
                if lease is None:
                    # Another live worker holds the run (or it has ended): that worker applies
                    # the signal.
                    asked = {
                        "placement": placement,
                        "key": key,
                        "token_id": token_id,
                        "payload": payload,
                        "output": output,
                        "idempotency_key": idempotency_key,
                    }
                    return await self._send(park, asked)
                ex = await self._executor(park.run_id, lease, now)
            if ex is None:
                raise await self._refusal(park)
            receipt = await self._apply(ex, park, payload, output, idempotency_key)
            if receipt is not None:
                return receipt
        raise EngineError("signal: the run kept changing under this signal; try again")

    async def _apply(
        self,
        ex: RunExecutor,
        park: ParkRecord,
        payload: dict[str, Any],
        output: str | None,
        idempotency_key: str | None,
    ) -> SignalReceipt | None:
        """The signal applied by this engine, which holds the run (None: look again)."""
        if not ex.pin():
            return None
        try:
            answer = await ex.signal(
                park, payload=payload, output=output, idempotency_key=idempotency_key
            )
            receipt = SignalReceipt.from_answer(answer)
        except DuplicateSignal:
            assert idempotency_key is not None
            known = await self._host.store.signal_answer(idempotency_key)
            assert known is not None
            return SignalReceipt.from_answer(known.answer, duplicate=True)
        except StoreConflict:
            # Another process moved the token first: forget what we knew and look again.
            self._discard(ex)
            return None
        finally:
            ex.unpin()
        await self._let_out(ex)
        return receipt

    async def _refusal(self, park: ParkRecord) -> SignalRefused:
        """Why a signal for ``park`` of a run that has ended is refused."""
        latest = await self._host.store.parks(run_id=park.run_id)
        stored = next((p for p in latest if p.id == park.id), park)
        return refusal(stored, self._host.clock.now())

    async def _send(self, park: ParkRecord, asked: dict[str, Any]) -> SignalReceipt:
        """Send the signal to the run's holder through the store, and wait for its answer."""
        host = self._host
        request = SignalRequest(uuid.uuid4().hex, park.run_id, host.clock.now(), asked)
        try:
            await host.store.request_signal(request)
        except RunEndedError:
            raise await self._refusal(park) from None
        give_up = host.clock.now() + PATIENCE_LEASES * host.lease_ttl
        taken: RunExecutor | None = None
        try:
            while True:
                kept = await host.store.signal_request(request.id)
                if kept is not None and kept.answer is not None:
                    return receipt_of(kept.answer)
                run = await host.store.get_run(park.run_id)
                if Lifecycle(run.lifecycle).terminal:
                    # Its due entries went with its end; answered just before, or refused.
                    kept = await host.store.signal_request(request.id)
                    if kept is not None and kept.answer is not None:
                        return receipt_of(kept.answer)
                    raise await self._refusal(park)
                taken = await self._fire_here(park.run_id, give_up) or taken
                await self._changed(give_up)
        finally:
            if taken is not None:
                await self._let_out(taken)

    async def _fire_here(self, run_id: str, give_up: datetime) -> RunExecutor | None:
        """Fire the run's due entries here (the request among them) if nobody else holds the
        run alive, or if its holder has not answered by ``give_up``; the executor rebuilt here
        for it, if any."""
        host = self._host
        now = host.clock.now()
        ex = self._held(run_id)
        if ex is not None and not ex.released:
            await self._fire(ex, now)  # (a no-op for what is under way already)
            return None
        late = now >= give_up
        lease = await host.store.lease_of(run_id)
        if lease is not None and lease.owner != host.owner and lease.expires > now and not late:
            return None  # its holder answers
        taken = await host.store.acquire_run(
            run_id, host.owner, now, now + host.lease_ttl, force=late
        )
        if taken is None:
            return None
        if late and lease is not None and lease.owner != host.owner:
            log.warning(
                "run %s: its holder %s did not answer a signal within %s; taking the run over",
                printable(run_id),
                printable(lease.owner),
                PATIENCE_LEASES * host.lease_ttl,
            )
        return await self._executor(run_id, taken, now)

    async def _changed(self, give_up: datetime) -> None:
        """Until the store may have changed, or ``poll`` seconds have passed."""
        host = self._host
        # (Armed for a virtual clock: with nothing else due, it may move on to ``give_up``.)
        timer = host.clock.call_at(give_up, _nothing)
        try:
            await host.store.wait_changed(host.poll)
        except StoreError as exc:
            log.warning("signal: %s; looking again in %s s", exc, host.poll)
            await asyncio.sleep(host.poll)
        finally:
            timer.cancel()


def _nothing() -> None:
    """A timer's callback that does nothing (the timer only marks an instant)."""
