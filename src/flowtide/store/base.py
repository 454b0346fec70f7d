"""The store interface: everything the engine persists, behind one async API.

The engine keeps no state that a restart could not rebuild from a store:

* **runs** - one :class:`RunRecord` per run (flow id and version, lifecycle, creation instant,
  absolute deadline, the parent run for a subflow child, the final result, the
  :class:`Checkpoint` a rebuild starts from);
* **run state** - the run's state mapping (top-level keys are the unit of change);
* **tokens** - one :class:`TokenRecord` per token (placement, status, attempt, visit, split
  lineage, the stored absolute deadline of its current attempt, the due instant it waits for);
* **history** - the ordered :class:`EventRecord` list of each run;
* **due instants** - ``(instant, token, purpose)`` entries: retry backoffs and waits (purpose
  ``""``), park deadlines (``timeout``), escalation timers (``timer:<visit>:<index>``) and run
  deadlines of runs no engine holds in memory (``deadline``, the token id being the run id),
  indexed by instant: :meth:`Store.next_due` and :meth:`Store.claim_due`;
* **node anchors** - per (run, placement[, item]) first-arrival instants of ``node`` timeout
  anchors, stored once and released (:attr:`Commit.anchors_released`);
* **parks** - one :class:`ParkRecord` per time a token parked (its correlation key, deadline,
  payload, and how the park ended), so that a late signal can be told why it is refused;
* **signal answers** - the first answer to each signal idempotency key;
* **scatter progress** - per (run, token, item index) records, so a resumed scatter re-runs only
  the unfinished items.

Every engine step goes through :meth:`Store.commit` with one :class:`Commit`: the token moves, the
state change, the history events, due instants, anchors and scatter progress of that step. A
transactional store applies a commit atomically (all or nothing); ``Commit.expect`` makes the
step conditional on token records (compare-and-set on status, epoch and "deadline still ahead"),
so racing steps (a signal, a park timeout, a timer, a cancel) are decided by the store: the first
to commit wins, the others get :class:`StoreConflict`. Instants are always passed in by the
engine (from its clock), never read by the store.

Run state, token and event data, park payloads, scatter results and keys, run results and
options, signal answers and checkpoints are JSON on every store (:mod:`flowtide.store.jsonvalues`):
a store refuses a value that is not JSON with :class:`~flowtide.store.jsonvalues.NotJSONError`,
and gives back what JSON gives back (a tuple comes back as a list), as new objects on every read.
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
    "LIVE_TOKEN_STATUSES",
    "Checkpoint",
    "Commit",
    "DueEntry",
    "DuplicateSignal",
    "EventRecord",
    "Expect",
    "NodeAnchor",
    "ParkRecord",
    "ParkStatus",
    "RunRecord",
    "ScatterItemRecord",
    "SignalAnswer",
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
    """A conditional commit did not apply: a token was not as expected (``Commit.expect``)."""


class DuplicateSignal(StoreConflict):
    """A signal idempotency key already has an answer (another signal with it committed)."""


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
    """Waiting on the outside world (a signal), its deadline and timers (the sweeper)."""
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
LIVE_TOKEN_STATUSES: tuple[TokenStatus, ...] = tuple(s for s in TokenStatus if s.live)
"""The statuses of a live token, in declaration order (for ``Store.tokens(run, statuses)``)."""


Lineage = tuple[tuple[str, int, int], ...]
"""The splits a token descends from, outermost first: ``(split id, branch index, branch count)``."""


@dataclass(slots=True)
class Checkpoint:
    """What rebuilding a run from the store needs beyond its tokens, as of history event seq."""

    seq: int
    visits: dict[str, int]
    terminals: list[str]
    outcome: str | None

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as the JSON object a store keeps."""
        return {
            "seq": self.seq,
            "visits": dict(self.visits),
            "terminals": list(self.terminals),
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        """The checkpoint a store kept as :meth:`to_json` gave it."""
        return cls(
            int(data["seq"]),
            {str(k): int(v) for k, v in data["visits"].items()},
            [str(t) for t in data["terminals"]],
            data["outcome"],
        )


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
    checkpoint: Checkpoint | None = None
    """Written when the engine lets go of a parked run, so that a rebuild reads only the history
    after ``checkpoint.seq``."""


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
    """Engine bookkeeping: why it waits, the previous backoff, how its window was resolved..."""
    epoch: int = 0
    """Bumped by the engine each time the token parks, leaves a park or moves: a step decided
    against one epoch (a signal, a timeout) cannot apply to a later one (``Commit.expect``)."""


@dataclass(slots=True)
class EventRecord:
    """One event of a run's history, as hooks receive it: its ``kind`` (an
    :class:`~flowtide.engine.EventKind` value), run, instant, placement, attempt, token and
    data."""

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
    purpose: str = ""
    """What falls due: ``""`` (a wait or retry backoff), ``timeout`` (a park deadline),
    ``timer:<visit>:<index>`` (an escalation timer), ``deadline`` (a run deadline). A token has at
    most one entry per purpose."""


@dataclass(frozen=True, slots=True)
class NodeAnchor:
    run_id: str
    placement: str
    item: str | None
    at: datetime


class ParkStatus(StrEnum):
    PARKED = "parked"
    """Still waiting."""
    SIGNALLED = "signalled"
    """A signal moved the token on (or woke its node)."""
    TIMED_OUT = "timed_out"
    """Its deadline passed (the sweeper fired it)."""
    INTERRUPTED = "interrupted"
    """An interrupting escalation timer moved the token on."""
    CANCELLED = "cancelled"
    """The token was cancelled: the run was cancelled or ended, or a join cancelled the branch."""


@dataclass(slots=True)
class ParkRecord:
    """One park of a token: ``id`` is ``"<token id>#<epoch>"``."""

    id: str
    run_id: str
    token_id: str
    placement: str
    visit: int
    epoch: int
    parked_at: datetime
    deadline: datetime | None = None
    key: str | None = None
    """The correlation key signals may address it by."""
    payload: Any = None
    """What the node left for the outside world."""
    status: ParkStatus = ParkStatus.PARKED
    closed_at: datetime | None = None
    closed_by: str | None = None
    """What ended it: ``signal``, ``timeout``, ``timer:<output>``, or a cancel reason."""


@dataclass(frozen=True, slots=True)
class SignalAnswer:
    """The first answer given to a signal idempotency key."""

    key: str
    run_id: str
    answer: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Expect:
    """What a token record must be for a commit to apply (compare-and-set).

    ``status``: one status or several; ``epoch``: the token's epoch, if given; ``alive_at``: if
    given, the token's stored deadline must be None or later than this instant (a signal is
    refused at and after the deadline: the deadline wins the tie).
    """

    status: TokenStatus | frozenset[TokenStatus]
    epoch: int | None = None
    alive_at: datetime | None = None

    def check(self, token: TokenRecord | None) -> str | None:
        """None if ``token`` matches; otherwise why not (for :class:`StoreConflict`)."""
        if token is None:
            return "missing"
        return self.mismatch(token.status, token.epoch, token.deadline)

    def mismatch(self, status: str, epoch: int, deadline: datetime | None) -> str | None:
        """:meth:`check` of a token with these fields (``status``: a member or its value), for
        a store that keeps them without a record."""
        wanted = self.status if isinstance(self.status, frozenset) else frozenset({self.status})
        if status not in wanted:
            return f"{status}, not {'/'.join(sorted(s.value for s in wanted))}"
        if self.epoch is not None and epoch != self.epoch:
            return f"at epoch {epoch}, not {self.epoch}"
        if self.alive_at is not None and deadline is not None and deadline <= self.alive_at:
            return f"past its deadline {deadline.isoformat()}"
        return None


@dataclass(slots=True)
class ScatterItemRecord:
    """One finished item of a scatter visit."""

    run_id: str
    progress: str
    """The scatter visit it belongs to: its placement and visit
    (:func:`flowtide.engine.scatter.progress_key`)."""
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
    """Top-level state keys to delete (a key the state does not have is ignored)."""
    events: Sequence[EventRecord] = ()
    """Appended to the run's history, in this order."""
    due: Sequence[DueEntry] = ()
    """Due instants to set (one per token and purpose: a new one replaces the old)."""
    due_cleared: Sequence[str] = ()
    """Token ids whose due entries (every purpose) are dropped; applied before ``due``."""
    due_dropped: Sequence[tuple[str, str]] = ()
    """(token id, purpose) due entries dropped; applied before ``due``."""
    anchors: Sequence[NodeAnchor] = ()
    """Node anchors to store (first arrivals)."""
    anchors_released: Sequence[tuple[str, str | None]] = ()
    """(placement, item) node anchors of this run to drop."""
    scatter: Sequence[ScatterItemRecord] = ()
    """Scatter item records to insert or replace (by run, token and index)."""
    parks: Sequence[ParkRecord] = ()
    """Park records to insert or replace."""
    signal_answers: Sequence[SignalAnswer] = ()
    """Answers to record; a key that already has one (or comes twice) fails the commit with
    :class:`DuplicateSignal`."""
    expect: Mapping[str, TokenStatus | Expect] = field(default_factory=dict)
    """Token id -> what it must be for the commit to apply (else ``StoreConflict``)."""
    run_lifecycles: frozenset[str] | None = None
    """If given, the run's stored lifecycle must be one of these for the commit to apply (else
    ``StoreConflict``): a step decided on a run that another actor has ended since is refused.
    Checked against the run as stored before this commit (not its ``run``)."""


class Store(ABC):
    """Where runs live. Every method is a coroutine; implementations must be safe to call from
    many tasks of one event loop (and, for the database stores, many processes).

    Every store passes :func:`flowtide.testing.check_store`, the behaviour below as checks.
    Reads give new records and values every time: changing what a read returned (or a record
    after it was written) changes nothing stored. A value that is not JSON where JSON is kept
    is refused with :class:`~flowtide.store.jsonvalues.NotJSONError` and nothing is written.
    """

    @abstractmethod
    async def create_run(
        self, run: RunRecord, state: Mapping[str, Any], commit: Commit | None = None
    ) -> Sequence[EventRecord]:
        """Insert a new run with its initial state, and apply ``commit`` (a commit of this run)
        with it, all or nothing; returns the commit's events as :meth:`commit` does. A run id
        that exists already raises :class:`StoreError`."""

    @abstractmethod
    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        """Apply one step, all or nothing; returns its events, the commit's own records, with
        their ``seq`` filled in.

        Nothing is applied when the run is unknown (:class:`UnknownRunError`), an expectation
        does not hold (:class:`StoreConflict`), a signal key is answered already
        (:class:`DuplicateSignal`) or a value is not JSON. Otherwise, in this order: the run
        record, tokens, state keys set then deleted, events (numbered on from the run's last
        ``seq``), due entries cleared by token, dropped by purpose, then set, node anchors stored
        then released, scatter items, parks and signal answers."""

    @abstractmethod
    async def get_run(self, run_id: str) -> RunRecord:
        """The run (raises :class:`UnknownRunError`)."""

    @abstractmethod
    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        """Every run, or those whose lifecycle is ``lifecycle`` (in no promised order)."""

    @abstractmethod
    async def get_state(self, run_id: str) -> dict[str, Any]:
        """A copy of the run's state (raises :class:`UnknownRunError`)."""

    @abstractmethod
    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        """The run's tokens (optionally only those in ``statuses``), in the order they were
        first written (raises :class:`UnknownRunError`)."""

    @abstractmethod
    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        """The run's events with ``seq > after``, in order: a run's events are numbered 1, 2,
        3, ... as they are committed (raises :class:`UnknownRunError`)."""

    @abstractmethod
    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        """One token of a run (None if the run has no such token; raises
        :class:`UnknownRunError`)."""

    @abstractmethod
    async def next_due(self) -> datetime | None:
        """The earliest due instant of any token, or None."""

    @abstractmethod
    async def claim_due(self, now: datetime, limit: int = 100) -> Sequence[DueEntry]:
        """Remove and return up to ``limit`` due entries with ``when <= now``, earliest first;
        entries of one instant in the order they were set (a commit's in its order). An entry
        is claimed once, whoever claims it."""

    @abstractmethod
    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        """The stored anchor instant of (run, placement[, item]), if any."""

    @abstractmethod
    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        """Every stored (not released) node anchor of the run."""

    @abstractmethod
    async def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        """Park records matching every given filter, in the order they were first written (at
        least one of ``run_id`` and ``key`` is required, else :class:`StoreError`;
        ``open_only``: only those still parked)."""

    @abstractmethod
    async def signal_answer(self, key: str) -> SignalAnswer | None:
        """The recorded answer to a signal idempotency key, if any."""

    @abstractmethod
    async def scatter_items(self, run_id: str, progress: str) -> Sequence[ScatterItemRecord]:
        """The recorded items of one scatter visit (its ``progress`` key), by index."""
