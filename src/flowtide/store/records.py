"""What a store keeps, as records: runs, tokens, events, due entries, anchors, parks, signal
answers and requests, workers' heartbeats, scatter items, flow documents and leases; and a
:class:`Commit`, one step's worth of them (see :mod:`flowtide.store.base` for what a store does
with them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

__all__ = [
    "LIVE_TOKEN_STATUSES",
    "Checkpoint",
    "ClockReading",
    "Commit",
    "DueEntry",
    "EventRecord",
    "Expect",
    "Lease",
    "LeaseTake",
    "Lineage",
    "NodeAnchor",
    "ParkRecord",
    "ParkStatus",
    "RequestAnswer",
    "RunRecord",
    "RunSnapshot",
    "ScatterItemRecord",
    "SignalAnswer",
    "SignalRequest",
    "StoredFlow",
    "StoredFlowVersion",
    "TokenRecord",
    "TokenStatus",
    "WorkerRecord",
    "lineage_of",
]


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's hold on a run: ``owner`` (the worker's id, unique to one process's life),
    ``epoch`` (bumped each time a new owner takes the run) and the instant it ``expires``
    unless renewed. A lease just taken by :meth:`~flowtide.store.base.Store.claim_runs` or
    :meth:`~flowtide.store.base.Store.acquire_run` says whom the run was ``taken_from``: the
    other owner that held it (its lease expired, or taken with ``force``); None when nobody
    held it or ``owner`` did already, and on any lease read or renewed."""

    run_id: str
    owner: str
    epoch: int
    expires: datetime
    taken_from: str | None = None


@dataclass(frozen=True, slots=True)
class LeaseTake:
    """A commit that takes its run's lease in its own transaction (:attr:`Commit.take`): a
    worker that read the run while nobody held it (:attr:`RunSnapshot.lease` None) wakes it
    without taking the lease first. The commit applies only while the run is still held by
    nobody at epoch ``lease.epoch - 1`` (nobody has taken it since it was read, so nobody has
    changed it under a lease), or by ``lease.owner`` at ``lease.epoch`` already (that worker
    took it meanwhile); else :class:`~flowtide.store.base.LeaseLost`, nothing applied. The run
    is then held by ``lease`` until its expiry (with :attr:`~flowtide.store.base.Store.own_clock`,
    for ``lease.expires - now`` from the store's clock)."""

    lease: Lease
    now: datetime


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One reading of a store's clock against a local one: how far the store's clock is
    ``ahead`` (negative: behind), taken at the middle of the ``round_trip`` the reading took on
    the local clock. The true difference lies within half the round trip of ``ahead``."""

    ahead: timedelta
    round_trip: timedelta


@dataclass(frozen=True, slots=True)
class StoredFlow:
    """A flow document as a store keeps it: under its flow id and the digest of its content
    (``version`` is the label the document gives itself; two documents of one flow id and
    version with different content are two stored flows, told apart by ``digest``)."""

    flow_id: str
    version: str
    digest: str
    """The SHA-256 of the document's canonical JSON text, in hex."""
    document: dict[str, Any]
    """The flow as a JSON document (:func:`flowtide.documents.to_document`)."""


@dataclass(frozen=True, slots=True)
class StoredFlowVersion:
    """One stored flow document, as :meth:`Store.flow_versions` lists it (without the
    document)."""

    flow_id: str
    version: str
    """The version label the document gives itself."""
    digest: str
    stored_at: datetime | None
    """When it was first stored (None: stored by a Flowtide that did not record it, and no run
    was started on it since)."""
    runs: int
    """How many runs were started on this very document (subflow children included)."""
    latest: bool
    """It is the document of its flow id stored last (the one a run started by id uses)."""


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


def lineage_of(splits: Iterable[Sequence[Any]]) -> Lineage:
    """``splits`` (as a store reads them back: lists, say) as a :data:`Lineage` of tuples."""
    if not splits:
        return ()  # (most tokens: no split)
    return tuple((str(split), int(branch), int(count)) for split, branch, count in splits)


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
    ``timer:<visit>:<index>`` (an escalation timer), ``deadline`` (a run deadline), ``signal``
    (a :class:`SignalRequest` to answer; ``token_id`` is the request's id). A token has at most
    one entry per purpose."""


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


@dataclass(slots=True)
class SignalRequest:
    """A signal or a cancel recorded for the worker that holds the run to apply
    (:meth:`Store.request_signal`); ``answer`` is None until a worker has answered."""

    id: str
    run_id: str
    requested_at: datetime
    """The instant the store recorded it (the one a signal is judged at)."""
    request: dict[str, Any]
    """What was asked (JSON): ``kind`` (``signal``, the default, or ``cancel``); for a signal
    the addressing, payload, output and idempotency key; for a cancel its ``reason``."""
    answer: dict[str, Any] | None = None
    """The answer (JSON): an accepted signal's or a refusal's, or whether the run was
    cancelled."""
    answered_at: datetime | None = None

    @property
    def kind(self) -> str:
        """``signal`` or ``cancel``."""
        return str(self.request.get("kind", "signal"))


@dataclass(slots=True)
class WorkerRecord:
    """A worker's heartbeat (:meth:`Store.record_worker`), written when its engine starts and
    every third of its lease term, removed when it closes cleanly."""

    worker_id: str
    host: str
    pid: int
    started_at: datetime
    last_seen: datetime
    """The instant of its last heartbeat, from its engine's clock."""
    lease_ttl: float
    """Its lease term, in seconds: it beats every third of it (so a worker not seen for a few
    terms is gone)."""
    runs_held: int = 0
    nodes: list[str] = field(default_factory=list)
    """The node ids it implements (its registry's)."""
    waiting: dict[str, list[str]] = field(default_factory=dict)
    """Run id -> the node ids it lacks, for the runs it set aside because it cannot drive them
    (they wait for a worker with those nodes)."""


@dataclass(frozen=True, slots=True)
class RequestAnswer:
    """The answer a commit records to a :class:`SignalRequest` of its run."""

    request_id: str
    answer: dict[str, Any]
    at: datetime


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
    (:func:`flowtide.engine.run.scatter.progress_key`)."""
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
    """One engine step (or several steps of one run, one after another, put together by the
    engine: :mod:`flowtide.engine.run.coalescing`), applied by :meth:`Store.commit` all at
    once."""

    run_id: str
    run: RunRecord | None = None
    """The run record to write (None: unchanged)."""
    tokens: Sequence[TokenRecord] = ()
    """Token records to insert or replace."""
    state: Mapping[str, Any] | None = None
    """Top-level state keys to set (an :class:`~flowtide.store.jsonvalues.EncodedState` carries
    the JSON text of its values, encoded where the engine checked them: written as given)."""
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
    wakes: Sequence[DueEntry] = ()
    """Due entries set on other runs, each on its own ``run_id``, as :attr:`due` sets them (a
    child run's end wakes its parent in the same transaction). An entry of a run that has
    ended is dropped; the run's wake instant is brought up to date, as by its own commits."""
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
    requests_answered: Sequence[RequestAnswer] = ()
    """Answers to requests of this run; a request that is not this run's, is answered
    already, or comes twice fails the commit with :class:`StoreConflict` (a request is answered
    once)."""
    fires_deadline: datetime | None = None
    """The instant of the deadline this commit fires (a park's timeout, an interrupting timer),
    if any: the commit is refused with :class:`StoreConflict` while the run has an unanswered
    request recorded before that instant (the request is applied first), and, with
    :attr:`Store.own_clock`, with :class:`DeadlineAhead` while that clock is before it. The
    store then records requests of the run after it no earlier than that instant."""
    expect: Mapping[str, TokenStatus | Expect] = field(default_factory=dict)
    """Token id -> what it must be for the commit to apply (else ``StoreConflict``)."""
    run_lifecycles: frozenset[str] | None = None
    """If given, the run's stored lifecycle must be one of these for the commit to apply (else
    ``StoreConflict``): a step decided on a run that another actor has ended since is refused.
    Checked against the run as stored before this commit (not its ``run``)."""
    due_fired: Sequence[DueEntry] = ()
    """Due entries this step fired: each is removed if the store still holds it as it is
    (same token, purpose and instant; one set again since, for another instant, is kept).
    Applied with ``due_dropped``, before ``due``."""
    lease: Lease | None = None
    """If given, the run's stored lease owner and epoch must be this lease's for the commit to
    apply (else :class:`LeaseLost`); its expiry is not compared."""
    take: LeaseTake | None = None
    """If given, the commit takes the run's lease (instead of carrying one): see
    :class:`LeaseTake`."""
    release: bool = False
    """Give the run back once the commit has applied: it has no owner any more (the epoch is
    kept; the next owner bumps it)."""


@dataclass(slots=True)
class RunSnapshot:
    """Everything a rebuild of a run reads, read at once (:meth:`Store.load_run`): one
    consistent view of the run, as no piecemeal reads could give while others write."""

    run: RunRecord
    state: dict[str, Any]
    tokens: Sequence[TokenRecord]
    """Every token of the run, in the order they were first written."""
    history: Sequence[EventRecord]
    """The events after the run's resume checkpoint (all of them without one), in order."""
    parks: Sequence[ParkRecord]
    """The run's open parks, in the order they were first written."""
    anchors: Sequence[NodeAnchor]
    """The run's stored (not released) node anchors."""
    due: Sequence[DueEntry]
    """The run's due entries, earliest first (as :meth:`Store.due_of`)."""
    lease: Lease | None = None
    """Who held the run when it was read (a lease that had expired too); None: nobody."""
    epoch: int | None = None
    """The run's lease epoch when it was read (kept while nobody holds it): a commit may take
    the lease at the next one (:class:`LeaseTake`). None: not read with the rest (the lease is
    then taken before the run is changed)."""
