"""Signal requests as the SQL stores record them, written once as a script
(:mod:`flowtide.store.sqlcore.script`): the request stored with its run's row held (SQLite's
write lock, PostgreSQL's row lock), then its due entry, and its run settled so that its holder,
wherever it is, claims it again at once.

The instant a request is recorded at is the statement's (``insert_request``): the database's
clock with :attr:`~flowtide.store.base.Store.own_clock`, else the instant given; either way no
earlier than the latest deadline of its run fired (``note_deadline_fired``)."""

from __future__ import annotations

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    RunEndedError,
    SignalRequest,
    StoreError,
    UnknownRunError,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlcore.script import Ask, Put, Script
from flowtide.store.sqlcore.writes import lifecycles, settle

__all__ = ["request_signal"]


def request_signal(request: SignalRequest, d: Dialect, *, own_clock: bool) -> Script[SignalRequest]:
    """Store ``request`` and its due entry (see :meth:`Store.request_signal
    <flowtide.store.base.Store.request_signal>`); the script's answer is the request as stored.
    Its value is encoded here, in the caller's task (raises ``NotJSONError``)."""
    params = {
        "id": request.id,
        "run_id": request.run_id,
        "requested_at": None if own_clock else d.instant(request.requested_at),
        "request": d.json(request.request, "request"),
    } | lifecycles(d)
    return _stored(request, params, d)


def _stored(request: SignalRequest, params: Params, d: Dialect) -> Script[SignalRequest]:
    run_id = request.run_id
    run, inserted = yield Ask([("run_for_request", {"run_id": run_id}), ("insert_request", params)])
    if not run:
        raise UnknownRunError(run_id)
    lifecycle = run[0][0]
    if lifecycle in ENDED_LIFECYCLES:
        raise RunEndedError(run_id, lifecycle)
    if not inserted:
        raise StoreError(f"signal request {request.id!r} already exists")
    requested_at = d.read_instant(inserted[0][0])
    # (Due at once on the clock of whoever sent it, and on the store's.)
    due = {"run_id": run_id, "token_id": request.id, "purpose": "signal"}
    due["due_at"] = d.instant(min(requested_at, request.requested_at))
    # (The run's holder, wherever it is, must look at once.)
    woken = settle(run_id, d, release=False, tell=True, by_holder=False)
    yield Put([("set_due", [due]), woken])
    return SignalRequest(request.id, run_id, requested_at, decode_json(params["request"]))
