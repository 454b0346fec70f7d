"""A new run as the SQL stores create it, written once: its record, initial state and first
commit encoded in the caller's task (:meth:`Creation.of`), and what refuses it checked in the
memory store's order (:meth:`Creation.check`). Each store reads the facts and runs the writes
its own way (SQLite in its thread, PostgreSQL in a pipeline): ``insert_run``, ``put_state``,
then the first commit's statements (:func:`flowtide.store.sqlcore.writes.commit_writes`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowtide.store.base import Commit, Lease, LeaseLost, RunRecord, StoreError
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.sqlcore.params import (
    Dialect,
    EncodedCommit,
    Params,
    encode_commit,
    run_params,
    state_params,
)

__all__ = ["Creation"]


@dataclass(slots=True)
class Creation:
    """A run to create, with its first commit (``step``: an empty one if none is given),
    encoded; and what waits for its turn to be raised, after the run's id was found free."""

    run: RunRecord
    lease: Lease | None
    step: EncodedCommit
    row: Params = field(default_factory=dict)
    """The run's row: its record and who holds it."""
    state: list[Params] = field(default_factory=list)
    invalid: ValueError | None = None
    not_json: Exception | None = None
    lease_lost: LeaseLost | None = None

    @classmethod
    def of(
        cls,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None,
        lease: Lease | None,
        d: Dialect,
        *,
        own_clock: bool = False,
    ) -> Creation:
        """``own_clock``: a lease it is created with is held from the database's clock, for the
        term asked from the run's creation (:attr:`~flowtide.store.base.Store.own_clock`)."""
        made = cls(run, lease, encode_commit(commit or Commit(run.id), d))
        if commit is not None and commit.run_id != run.id:
            made.invalid = ValueError(
                f"a commit of run {commit.run_id!r} cannot create run {run.id!r}"
            )
        elif lease is not None and lease.run_id != run.id:
            made.invalid = ValueError(
                f"a lease on run {lease.run_id!r} cannot create run {run.id!r}"
            )
        try:
            made.row = run_params(run, "run", d)
            made.state = state_params(run.id, state, d)
        except Exception as error:  # (reported after the run's own checks, as the memory store)
            made.not_json = error
        if commit is not None and commit.lease is not None and commit.lease != lease:
            made.lease_lost = LeaseLost(
                f"run {run.id!r} is created without the lease its commit carries"
            )
        held: tuple[str | None, int, Any] = (None, 0, None)
        if lease is not None:
            held = (lease.owner, lease.epoch, d.instant(lease.expires))
        made.row.update(zip(("owner", "epoch", "lease_expires"), held, strict=True))
        made.row["lease_term"] = None
        if lease is not None and own_clock:
            made.row["lease_term"] = d.duration(lease.expires - run.created_at)
        made.row["last_seq"] = len(made.step.commit.events)
        return made

    @property
    def ended(self) -> bool:
        """Whether the run is created ended."""
        return bool(self.row.get("ended"))

    @property
    def may_be_refused(self) -> bool:
        """Whether anything but an id taken already may refuse it (else no check is needed
        before writing: a taken id fails the insert)."""
        c = self.step.commit
        return bool(
            self.invalid
            or self.not_json
            or self.lease_lost
            or self.step.invalid
            or self.step.not_json
            or c.run_lifecycles is not None
            or c.expect
            or c.signal_answers
            or c.requests_answered
        )

    def check(self, exists: bool, facts: RunFacts) -> None:
        """Raise what keeps the run from being created (``exists``: its id is taken; ``facts``:
        what its first commit is checked against), in the memory store's order."""
        if exists:
            raise StoreError(f"run {self.run.id!r} already exists")
        for error in (self.invalid, self.not_json, self.lease_lost):
            if error is not None:
                raise error
        step = self.step
        check_commit(step.commit, facts, creating=True, not_json=step.not_json)
