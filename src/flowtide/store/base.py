"""The store interface: everything the engine persists, behind one async API.

The engine keeps no state that a restart could not rebuild from a store:

* **runs** - one :class:`RunRecord` per run (flow id and version, lifecycle, creation instant,
  absolute deadline, the parent run for a subflow child, the final result);
* **run state** - the run's state mapping (top-level keys are the unit of change);
* **tokens** - one :class:`TokenRecord` per token (placement, status, attempt, visit, split
  lineage, the stored absolute deadline of its current attempt, the due instant it waits for);
* **history** - the ordered :class:`EventRecord` list of each run;
* **due instants** - ``(instant, token)`` entries for tokens waiting on a timer (retry backoffs,
  waits), indexed by instant: :meth:`Store.next_due` and :meth:`Store.claim_due`;
* **node anchors** - per (run, placement[, item]) instants, reserved for timeout anchors;
* **scatter progress** - per (run, token, item index) records, so a resumed scatter re-runs only
  the unfinished items.

Every engine step goes through :meth:`Store.commit` with one :class:`Commit`: the token moves, the
state change, the history events, due instants, anchors and scatter progress of that step. A
transactional store applies a commit atomically (all or nothing); ``Commit.expect`` lets the
engine make the step conditional on token statuses (compare-and-set), so racing steps are decided
by the store. Instants are always passed in by the engine (from its clock), never read by the
store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from flowtide.errors import FlowtideError

__all__ = [
    "Commit",
    "DueEntry",
    "EventRecord",
    "NodeAnchor",
    "RunRecord",
    "ScatterItemRecord",
    "Store",
    "StoreConflict",
    "StoreError",
    "TokenRecord",
    "TokenStatus",
    "UnknownRunError",
]


class StoreError(FlowtideError):
    """A store could not do what was asked."""


class UnknownRunError(StoreError, KeyError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class StoreConflict(StoreError):
    """A conditional commit did not apply: a token was not in the expected status."""


class TokenStatus(StrEnum):
    READY = "ready"
    """Created, about to run its placement."""
    RUNNING = "running"
    """Running an attempt of its placement (``deadline`` is that attempt's window end)."""
    WAITING = "waiting"
    """Waiting for its ``due`` instant (a wait placement, or a retry backoff)."""
    ARRIVED = "arrived"
    """Arrived at a join that has not fired yet."""
    PARKED = "parked"
    """Reserved: waiting on the outside world."""
    DONE = "done"
    """Left the flow: reached a terminal, split, merged at a join, or moved on as a new token."""
    CANCELLED = "cancelled"
    """Cancelled (run deadline, abort, a first/quorum join's loser, the run ending)."""
    FAILED = "failed"
    """Its placement failed the run."""

    @property
    def live(self) -> bool:
        return self in _LIVE


_LIVE = frozenset(
    {
        TokenStatus.READY,
        TokenStatus.RUNNING,
        TokenStatus.WAITING,
        TokenStatus.ARRIVED,
        TokenStatus.PARKED,
    }
)


Lineage = tuple[tuple[str, int, int], ...]
"""The splits a token descends from, outermost first: ``(split id, branch index, branch count)``."""


@dataclass(slots=True)
class RunRecord:
    id: str
    flow_id: str
    flow_version: str
    lifecycle: str
    created_at: datetime
    deadline: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    parent_run_id: str | None = None
    parent_token_id: str | None = None
    depth: int = 0
    outcome: str | None = None
    result: dict[str, Any] | None = None
    """The JSON form of the run's result, once it has ended."""
    options: dict[str, Any] = field(default_factory=dict)
    """What the run was started with (entrypoint, ...), for resuming."""


@dataclass(slots=True)
class TokenRecord:
    id: str
    run_id: str
    placement: str
    status: TokenStatus
    attempt: int = 1
    visit: int = 1
    lineage: Lineage = ()
    deadline: datetime | None = None
    """The absolute end of the current attempt's window (None: no window)."""
    due: datetime | None = None
    """The instant a waiting token is due."""
    created_at: datetime | None = None
    data: dict[str, Any] = field(default_factory=dict)
    """Engine bookkeeping: why it waits, the previous backoff, ..."""


@dataclass(slots=True)
class EventRecord:
    kind: str
    run_id: str
    at: datetime
    placement: str | None = None
    attempt: int | None = None
    token_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    """Position in the run's history, assigned by the store (1, 2, 3, ...)."""


@dataclass(frozen=True, slots=True)
class DueEntry:
    when: datetime
    run_id: str
    token_id: str


@dataclass(frozen=True, slots=True)
class NodeAnchor:
    run_id: str
    placement: str
    item: str | None
    at: datetime


@dataclass(slots=True)
class ScatterItemRecord:
    run_id: str
    token_id: str
    index: int
    status: str
    """``done`` (the body finished, whatever its output) or ``failed`` (it raised)."""
    output: str | None = None
    result: Any = None
    key: Any = None
    order: int = 0
    """Completion order among the scatter's items (1, 2, ...)."""


@dataclass(slots=True)
class Commit:
    """One engine step, applied by :meth:`Store.commit` all at once."""

    run_id: str
    run: RunRecord | None = None
    """The run record to write (None: unchanged)."""
    tokens: Sequence[TokenRecord] = ()
    """Token records to insert or replace."""
    state: Mapping[str, Any] | None = None
    """Top-level state keys to set."""
    state_deleted: Sequence[str] = ()
    events: Sequence[EventRecord] = ()
    """Appended to the run's history, in this order."""
    due: Sequence[DueEntry] = ()
    """Due instants to set (one per token: a new one replaces the old)."""
    due_cleared: Sequence[str] = ()
    """Token ids whose due instant is dropped."""
    anchors: Sequence[NodeAnchor] = ()
    scatter: Sequence[ScatterItemRecord] = ()
    expect: Mapping[str, TokenStatus] = field(default_factory=dict)
    """Token id -> the status it must have for the commit to apply (else ``StoreConflict``)."""


class Store(ABC):
    """Where runs live. Every method is a coroutine; implementations must be safe to call from
    many tasks of one event loop (and, for the database stores, many processes)."""

    @abstractmethod
    async def create_run(
        self, run: RunRecord, state: Mapping[str, Any], commit: Commit | None = None
    ) -> Sequence[EventRecord]:
        """Insert a new run with its initial state, and apply ``commit`` with it."""

    @abstractmethod
    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        """Apply one step atomically; returns its events with their ``seq`` filled in."""

    @abstractmethod
    async def get_run(self, run_id: str) -> RunRecord:
        """The run (raises :class:`UnknownRunError`)."""

    @abstractmethod
    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]: ...

    @abstractmethod
    async def get_state(self, run_id: str) -> dict[str, Any]:
        """A copy of the run's state."""

    @abstractmethod
    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        """The run's tokens (optionally only those in ``statuses``), in creation order."""

    @abstractmethod
    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        """The run's events with ``seq > after``, in order."""

    @abstractmethod
    async def next_due(self) -> datetime | None:
        """The earliest due instant of any token, or None."""

    @abstractmethod
    async def claim_due(self, now: datetime, limit: int = 100) -> Sequence[DueEntry]:
        """Remove and return up to ``limit`` due entries with ``when <= now``, earliest first."""

    @abstractmethod
    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        """The stored anchor instant of (run, placement[, item]), if any."""

    @abstractmethod
    async def scatter_items(self, run_id: str, token_id: str) -> Sequence[ScatterItemRecord]:
        """The recorded items of one scatter visit (its token), by index."""
