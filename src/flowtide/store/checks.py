"""Whether a commit may apply: the one set of checks every store runs (memory, SQLite,
PostgreSQL), on what each store read of the run its own way (:class:`RunFacts`).

The checks run in one order on every store, so that a commit with several faults is refused
for the same one everywhere: the run record it carries, its lease (or the lease it takes), the
run's lifecycle, its token expectations, its signal keys, the requests it answers, the deadline
it fires, and last its values (a value that is not JSON is reported only once everything else
passed).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from flowtide.store.base import DeadlineAhead, DuplicateSignal, LeaseLost, StoreConflict
from flowtide.store.records import Commit, Expect, Lease, LeaseTake

__all__ = ["RunFacts", "TokenFacts", "check_commit", "check_lease", "check_take", "foreign_run"]

TokenFacts = tuple[str, int, datetime | None]
"""What an expectation is checked against: a token's status, epoch and deadline."""


@dataclass(slots=True)
class RunFacts:
    """What a commit is checked against, as the store holds it before the commit."""

    lifecycle: str | None
    """The run's lifecycle (None: the commit creates the run)."""
    owner: str | None = None
    epoch: int = 0
    tokens: Mapping[str, TokenFacts] = field(default_factory=dict)
    """The tokens the commit expects, those found."""
    answered: Collection[str] = ()
    """The commit's signal keys that have an answer already."""
    unanswerable: Mapping[str, str] = field(default_factory=dict)
    """The requests the commit answers that it may not: id -> why (``unknown``, ``answered``)."""
    request_before: str | None = None
    """An unanswered request of the run recorded before the deadline the commit fires."""
    clock: datetime | None = None
    """The store's own clock (only a store that judges deadlines by it gives one)."""


def foreign_run(c: Commit) -> ValueError | None:
    """The error of a commit that carries another run's record (None if it does not)."""
    if c.run is not None and c.run.id != c.run_id:
        return ValueError(f"a commit of run {c.run_id!r} carries run {c.run.id!r}")
    return None


def check_lease(run_id: str, lease: Lease, owner: str | None, epoch: int) -> None:
    """Raise :class:`LeaseLost` unless the run is held by ``lease``'s owner at its epoch."""
    if owner != lease.owner or epoch != lease.epoch:
        who = f"{owner!r} at epoch {epoch}" if owner is not None else "nobody"
        raise LeaseLost(
            f"run {run_id!r} is held by {who}, not {lease.owner!r} at epoch {lease.epoch}"
        )


def check_take(run_id: str, take: LeaseTake, owner: str | None, epoch: int) -> None:
    """Raise :class:`LeaseLost` unless ``take`` may take the run's lease from how it is held
    (``owner`` at ``epoch``): see :class:`~flowtide.store.records.LeaseTake`."""
    wanted = take.lease
    if owner is None and epoch == wanted.epoch - 1:
        return
    if owner == wanted.owner and epoch == wanted.epoch:
        return
    who = f"{owner!r}" if owner is not None else "nobody"
    raise LeaseLost(
        f"run {run_id!r} is held by {who} at epoch {epoch}: {wanted.owner!r} cannot take it "
        f"at epoch {wanted.epoch}"
    )


def check_commit(
    c: Commit,
    facts: RunFacts,
    *,
    creating: bool = False,
    not_json: Exception | None = None,
) -> None:
    """Raise what keeps ``c`` from applying to a run with these ``facts`` (``creating``: the
    commit creates its run, whose lease was checked already; ``not_json``: why the commit's
    values could not be encoded, raised last)."""
    invalid = foreign_run(c)
    if invalid is not None:
        raise invalid
    if c.take is not None and creating:
        raise ValueError(f"a commit creating run {c.run_id!r} cannot take its lease")
    if c.take is not None:
        check_take(c.run_id, c.take, facts.owner, facts.epoch)
    elif c.lease is not None and not creating:
        check_lease(c.run_id, c.lease, facts.owner, facts.epoch)
    if c.run_lifecycles is not None and facts.lifecycle not in c.run_lifecycles:
        allowed = "/".join(sorted(c.run_lifecycles))
        raise StoreConflict(f"run {c.run_id!r} is {facts.lifecycle}, not {allowed}")
    for token_id, wanted in c.expect.items():
        expect = wanted if isinstance(wanted, Expect) else Expect(wanted)
        found = facts.tokens.get(token_id)
        why = "missing" if found is None else expect.mismatch(*found)
        if why is not None:
            raise StoreConflict(f"token {token_id!r} of run {c.run_id!r} is {why}")
    if c.signal_answers:  # (most steps answer nothing)
        _check_keys(c, facts)
    if c.requests_answered:
        _check_requests(c, facts)
    if c.fires_deadline is not None and not creating:
        _check_deadline(c.run_id, c.fires_deadline, facts)
    if not_json is not None:
        raise not_json


def _check_keys(c: Commit, facts: RunFacts) -> None:
    """Each signal key ``c`` answers is answered once, and had no answer before."""
    keys = [a.key for a in c.signal_answers]
    for key in keys:
        if key in facts.answered:
            raise DuplicateSignal(f"signal idempotency key {key!r} already answered")
        if keys.count(key) > 1:
            raise DuplicateSignal(f"signal idempotency key {key!r} answered twice in a commit")


def _check_requests(c: Commit, facts: RunFacts) -> None:
    """Each request ``c`` answers is the run's, unanswered, and answered once."""
    ids = [a.request_id for a in c.requests_answered]
    for request_id in ids:
        why = facts.unanswerable.get(request_id)
        if why is not None:
            raise StoreConflict(f"signal request {request_id!r} of run {c.run_id!r} is {why}")
        if ids.count(request_id) > 1:
            raise StoreConflict(f"signal request {request_id!r} answered twice in a commit")


def _check_deadline(run_id: str, deadline: datetime, facts: RunFacts) -> None:
    """A commit firing ``deadline`` waits for the requests recorded before it, and for the
    store's clock (if it judges by one) to reach it."""
    if facts.request_before is not None:
        raise StoreConflict(
            f"run {run_id!r} has a request recorded before the deadline "
            f"{deadline.isoformat()} ({facts.request_before})"
        )
    if facts.clock is not None and facts.clock < deadline:
        raise DeadlineAhead(run_id, deadline, deadline - facts.clock)
