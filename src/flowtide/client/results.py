"""What the client returns where the engine has no public type: a run as a list shows it, and a
flow registered in the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flowtide.engine.lifecycle import Lifecycle
from flowtide.store.base import RunRecord

__all__ = ["RegisteredFlow", "RunSummary"]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One stored run, as :meth:`flowtide.Client.runs` lists it (its state and history are
    read with ``get`` and ``history``)."""

    run_id: str
    flow_id: str
    flow_version: str
    lifecycle: Lifecycle
    outcome: str | None
    """The outcome of the terminal that ended it (None while it runs, or when none was
    reached)."""
    created_at: datetime
    finished_at: datetime | None
    deadline: datetime | None
    """The whole run's deadline, if it has one."""
    parent_run_id: str | None
    """The run whose subflow started this one, for a child run."""

    @classmethod
    def of(cls, run: RunRecord) -> RunSummary:
        return cls(
            run.id,
            run.flow_id,
            run.flow_version,
            Lifecycle(run.lifecycle),
            run.outcome,
            run.created_at,
            run.finished_at,
            run.deadline,
            run.parent_run_id,
        )


@dataclass(frozen=True, slots=True)
class RegisteredFlow:
    """A flow document put in the store by ``register``: runs started by its id use the latest
    one registered."""

    flow_id: str
    version: str
    digest: str
    """The SHA-256 of the document's canonical JSON text, in hex."""
    new: bool
    """False: this very document was stored already (nothing changed)."""
