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
  deadlines (``deadline``, the token id being the run id), read per run (:meth:`Store.due_of`)
  and removed by the commit of the move they cause (:attr:`Commit.due_fired`);
* **leases** - which worker holds each run (:class:`Lease`: owner, epoch, expiry), and the
  instant each run next needs a worker (its *wake* instant, below): :meth:`Store.claim_runs`;
* **flows** - the flow documents runs were started on or that were registered, by flow id and
  content digest (:class:`StoredFlow`), each with when it was first stored; the one of an id
  stored last is its latest (:meth:`Store.latest_flow`, :meth:`Store.flow_versions`);
* **node anchors** - per (run, placement[, item]) first-arrival instants of ``node`` timeout
  anchors, stored once and released (:attr:`Commit.anchors_released`);
* **parks** - one :class:`ParkRecord` per time a token parked (its correlation key, deadline,
  payload, and how the park ended), so that a late signal can be told why it is refused;
* **signal answers** - the first answer to each signal idempotency key;
* **requests** - signals and cancels recorded for the worker that holds a run to apply
  (:class:`SignalRequest`, of ``kind`` ``signal`` or ``cancel``): each with a due entry (purpose
  ``signal``) that wakes the run's holder, who applies it and records its answer
  (:attr:`Commit.requests_answered`). A request is judged at the instant the store recorded it
  (``requested_at``), and a commit that fires a deadline (:attr:`Commit.fires_deadline`) waits
  for the requests recorded before it;
* **scatter progress** - per (run, token, item index) records, so a resumed scatter re-runs only
  the unfinished items;
* **workers** - each executing engine's heartbeat (:class:`WorkerRecord`): who it is, when it
  was last seen, what it holds and implements, and the runs it cannot drive for want of nodes.

Every engine step goes through :meth:`Store.commit` with one :class:`Commit`: the token moves, the
state change, the history events, due instants, anchors and scatter progress of that step (steps
of one run queued behind one another may share one commit, which does what each does, in order). A
transactional store applies a commit atomically (all or nothing); ``Commit.expect`` makes the
step conditional on token records (compare-and-set on status, epoch and "deadline still ahead"),
so racing steps (a signal, a park timeout, a timer, a cancel) are decided by the store: the first
to commit wins, the others get :class:`StoreConflict`. Instants are passed in by the engine
(from its clock); only a store with a clock of its own (:attr:`Store.own_clock`, PostgreSQL's)
reads it, for the instant a request is recorded and whether a deadline may fire yet.

**Leases.** A run is driven by at most one worker at a time: the one holding its lease. A worker
takes runs with :meth:`Store.claim_runs` (runs whose wake instant has come) or
:meth:`Store.acquire_run` (one run, to cancel or resume it), or with the commit that first
changes a run it read while nobody held it (:attr:`Commit.take`: a signal's wake), keeps them
with :meth:`Store.renew_leases`, and gives one back with a commit that sets
:attr:`Commit.release`.
Each taking by a new owner bumps the run's lease *epoch*; a commit carrying :attr:`Commit.lease`
applies only while the run's stored owner and epoch are still those (else :class:`LeaseLost`),
so a worker that was presumed dead and replaced cannot write to the run any more (fencing).

**Wake instants.** Each run's wake instant is kept by the store, from what it holds:

* an ended run (a lifecycle of :data:`ENDED_LIFECYCLES`): none (and the commit that ends it
  removes its due entries);
* a held run: the earlier of its lease's expiry and its earliest due entry (its owner claims it
  again to fire the entry; anyone takes it over once the lease has expired);
* a run nobody holds, ``pending`` or ``running`` (:data:`RUNNABLE_LIFECYCLES`): its creation
  instant (it needs a worker now);
* any other run nobody holds (``parked``): its earliest due entry, or none.

Run state, token and event data, park payloads, scatter results and keys, run results and
options, signal answers and checkpoints are JSON on every store (:mod:`flowtide.store.jsonvalues`):
a store refuses a value that is not JSON with :class:`~flowtide.store.jsonvalues.NotJSONError`,
and gives back what JSON gives back (a tuple comes back as a list), as new objects on every read.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from flowtide.errors import FlowtideError
from flowtide.store.records import (
    LIVE_TOKEN_STATUSES,
    Checkpoint,
    ClockReading,
    Commit,
    DueEntry,
    EventRecord,
    Expect,
    Lease,
    LeaseTake,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RequestAnswer,
    RunRecord,
    RunSnapshot,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    StoredFlow,
    StoredFlowVersion,
    TokenRecord,
    TokenStatus,
    WorkerRecord,
)

__all__ = [
    "ENDED_LIFECYCLES",
    "LIVE_TOKEN_STATUSES",
    "PRUNE_BATCH",
    "RUNNABLE_LIFECYCLES",
    "Checkpoint",
    "ClockReading",
    "Commit",
    "CommitOutcomeUnknown",
    "DeadlineAhead",
    "DueEntry",
    "DuplicateSignal",
    "EventRecord",
    "Expect",
    "Lease",
    "LeaseLost",
    "LeaseTake",
    "NodeAnchor",
    "ParkRecord",
    "ParkStatus",
    "RequestAnswer",
    "RunEndedError",
    "RunRecord",
    "RunSnapshot",
    "ScatterItemRecord",
    "SignalAnswer",
    "SignalRequest",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreNotReady",
    "StoreOpenError",
    "StoreSchemaError",
    "StoredFlow",
    "StoredFlowVersion",
    "TokenRecord",
    "TokenStatus",
    "UnknownRunError",
    "UnknownStoredFlow",
    "WorkerRecord",
    "prefix_end",
]

ENDED_LIFECYCLES = frozenset({"completed", "failed", "cancelled", "timed_out"})
"""The lifecycles of a run that has ended (it has no wake instant and no due entries)."""
RUNNABLE_LIFECYCLES = frozenset({"pending", "running"})
"""The lifecycles of a run that needs a worker as soon as nobody holds it."""

PRUNE_BATCH = 500
"""How many runs :meth:`Store.prune_runs` deletes in one transaction by default."""


def prefix_end(prefix: str) -> str | None:
    """The least text greater than every text that starts with ``prefix`` (in code point order,
    which is the byte order of UTF-8: SQLite's and PostgreSQL's ``COLLATE "C"``), or None when
    there is none (``prefix`` is empty, or all its characters are the last code point): ids
    starting with ``prefix`` are those ``>= prefix`` and ``< prefix_end(prefix)``."""
    kept = prefix
    while kept:
        last = ord(kept[-1])
        if last < 0x10FFFF:
            following = 0xE000 if 0xD800 <= last + 1 <= 0xDFFF else last + 1  # (no surrogates)
            return kept[:-1] + chr(following)
        kept = kept[:-1]
    return None


class StoreError(FlowtideError):
    """A store could not do what was asked."""


class UnknownRunError(StoreError, KeyError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class StoreDataError(StoreError):
    """The store refused a value it was given: longer than it can index, a character it cannot
    hold, a broken constraint. The data is at fault, so the same write fails again: the engine
    does not retry it (it checks the limits it knows of before anything is stored)."""


class StoreConflict(StoreError):
    """A conditional commit did not apply: a token was not as expected (``Commit.expect``)."""


class RunEndedError(StoreConflict):
    """A signal request for a run that has ended (nothing was stored)."""

    def __init__(self, run_id: str, lifecycle: str) -> None:
        self.run_id = run_id
        self.lifecycle = lifecycle
        super().__init__(f"run {run_id!r} has ended ({lifecycle})")


class DeadlineAhead(StoreConflict):
    """A commit firing a deadline came before it on the store's clock (a worker whose clock runs
    ahead): nothing was applied. ``early_by``: how long before the deadline the store's clock
    was."""

    def __init__(self, run_id: str, deadline: datetime, early_by: timedelta) -> None:
        self.run_id = run_id
        self.deadline = deadline
        self.early_by = early_by
        super().__init__(
            f"run {run_id!r}: the deadline {deadline.isoformat()} is {early_by} ahead on the "
            "store's clock"
        )


class DuplicateSignal(StoreConflict):
    """A signal idempotency key already has an answer (another signal with it committed)."""


class StoreOpenError(StoreError):
    """A store could not be opened: its database is unreachable, refused us, or is not one
    Flowtide can use. The message names the database without its password."""


class StoreUnusableError(StoreError):
    """The store's database cannot be used as it is, and trying again will not change that: it
    is damaged, it is read-only (for a write), or its file was deleted or replaced while it was
    open. Someone must act on it; a worker stops. The message names the database."""


class StoreDown(StoreError):
    """The store cannot be reached for now (its server is down or restarting, a connection was
    lost): tried again, it may answer. The store logs one line when it stops answering and one
    when it answers again, so callers that try again need not say so each time."""


class CommitOutcomeUnknown(StoreDown):
    """The store was lost while a commit was being stored, after it was sent whole: it may have
    been applied, or not. Sent again, it could be applied twice; the run is read again from the
    store instead, once it answers."""


class StoreNotReady(StoreOpenError, StoreDown):
    """A store could not be opened because its database cannot be reached for now: its server
    is down or still starting, or has no connection left. Tried again, it may open (a wrong
    address, refused credentials or an unknown database are :class:`StoreOpenError` alone)."""


class StoreSchemaError(StoreOpenError):
    """A database's schema is not one this code can use: newer than the code (written by a
    later Flowtide), or not Flowtide's."""


class LeaseLost(StoreConflict):
    """A commit carried a lease the run no longer has: another worker has taken the run over
    (or it was given back)."""


class UnknownStoredFlow(StoreError, KeyError):
    """No flow document is stored under this id and digest (``digest`` None: none of this id)."""

    def __init__(self, flow_id: str, digest: str | None = None) -> None:
        self.flow_id = flow_id
        self.digest = digest
        if digest is None:
            super().__init__(f"no flow {flow_id!r} is stored")
        else:
            super().__init__(f"no stored flow {flow_id!r} with digest {digest[:12]}")

    def __str__(self) -> str:
        return str(self.args[0])


class Store(ABC):
    """Where runs live. Every method is a coroutine; implementations must be safe to call from
    many tasks of one event loop (and, for the database stores, many processes).

    Every store passes :func:`flowtide.testing.check_store`, the behaviour below as checks.
    Reads give new records and values every time: changing what a read returned (or a record
    after it was written) changes nothing stored. A value that is not JSON where JSON is kept
    is refused with :class:`~flowtide.store.jsonvalues.NotJSONError` and nothing is written.
    """

    shared: bool = False
    """Other processes may write to this store: a worker also waits for their changes
    (:meth:`wait_changed`), not only for its own."""

    own_clock: bool = False
    """Whether the store's own clock decides the instant a request is recorded and whether a
    deadline may fire yet (PostgreSQL: the database's clock, one for every worker). False: the
    instants the engine passes in decide (one machine's clock; or a virtual clock, which an
    engine on one sets here)."""

    busy: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
    """Work the store does off the event loop (a database round trip, a call in its thread)
    runs under ``busy()``. An engine on a virtual clock sets it to the clock's ``hold``, so
    that virtual time does not jump while the database works."""

    async def open(self) -> None:  # noqa: B027 (a store in memory has nothing to open)
        """Connect, and bring the database's schema up to date (raises
        :class:`StoreOpenError`); ``async with store`` opens it too. Opening twice is harmless."""

    async def close(self) -> None:  # noqa: B027 (a store holding nothing has nothing to do)
        """Give back what the store holds (connections); it cannot be used afterwards."""

    async def __aenter__(self) -> Store:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def on_request(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` whenever a request is recorded in this store object, or a commit
        wakes another run (:attr:`Commit.wakes`), by any engine of this process (a shared store
        tells other processes through :meth:`wait_changed`); returns what stops it."""
        return _nothing

    async def wait_changed(self, seconds: float, *, wakes_only: bool = False) -> bool:
        """Wait until another process may have changed what :meth:`next_wake` gives, or an
        answer a waiter looks for, or ``seconds`` (of real time) have passed; True if something
        may have changed. A store that only this process writes returns False once ``seconds``
        have passed. A lost notice only delays: callers look again at least every ``seconds``.
        ``wakes_only``: the caller looks only for changes of what :meth:`next_wake` gives (a
        sweeper); a store that can tell them from the rest (an answer given, a run ended) may
        wait on through the rest."""
        await asyncio.sleep(seconds)
        return False

    async def clock_offset(self, now: Callable[[], datetime]) -> ClockReading:
        """How far the store's clock is ahead of the local clock ``now`` reads, with the round
        trip the reading took. A store without a clock of its own (:attr:`own_clock` is False:
        one machine's) is never off: a difference of 0 in no time."""
        return ClockReading(timedelta(0), timedelta(0))

    @abstractmethod
    async def create_run(
        self,
        run: RunRecord,
        state: Mapping[str, Any],
        commit: Commit | None = None,
        *,
        lease: Lease | None = None,
    ) -> Sequence[EventRecord]:
        """Insert a new run with its initial state, and apply ``commit`` (a commit of this run)
        with it, all or nothing; returns the commit's events as :meth:`commit` does. A run id
        that exists already raises :class:`StoreError`. With ``lease`` the run is created held
        by its owner, at its epoch (the creator drives it); without, nobody holds it (a worker
        will claim it)."""

    @abstractmethod
    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        """Apply one step, all or nothing; returns its events, the commit's own records, with
        their ``seq`` filled in.

        Nothing is applied when the run is unknown (:class:`UnknownRunError`), its lease is not
        the commit's or may not be taken by it (:class:`LeaseLost`), an expectation does not
        hold (:class:`StoreConflict`), a signal key is answered already
        (:class:`DuplicateSignal`), a signal request is not one of the run's still unanswered
        (:class:`StoreConflict`) or a value is not JSON. Otherwise, in this order: the lease
        taken (:attr:`Commit.take`), the run record, tokens, state keys set then deleted, events
        (numbered on from the run's last ``seq``), due entries cleared by token, dropped by
        purpose and fired, then set (all of them removed if the run record written is ended),
        node anchors stored then released, scatter items, parks, signal answers, request
        answers, and the release of the lease; then the run's wake instant is brought up to
        date."""

    @abstractmethod
    async def get_run(self, run_id: str) -> RunRecord:
        """The run (raises :class:`UnknownRunError`)."""

    async def load_run(self, run_id: str) -> RunSnapshot:
        """Everything a rebuild of the run reads, in one read (raises
        :class:`UnknownRunError`): its record and state, every token, the history after its
        resume checkpoint, its open parks, node anchors and due entries, all as of one instant.
        (This default reads them one after another: a store that can read them at once does.)"""
        run = await self.get_run(run_id)
        seen = run.checkpoint.seq if run.checkpoint is not None else 0
        return RunSnapshot(
            run,
            await self.get_state(run_id),
            await self.tokens(run_id),
            await self.history(run_id, after=seen),
            await self.parks(run_id=run_id, open_only=True),
            await self.node_anchors(run_id),
            await self.due_of(run_id),
        )

    @abstractmethod
    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        """Every run, or those whose lifecycle is ``lifecycle`` (in no promised order)."""

    @abstractmethod
    async def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        """The ids of runs that start with ``prefix`` (every run's for ``""``), in code point
        order, at most ``limit`` of them: a worker's log shows runs by the start of their id."""

    @abstractmethod
    async def prune_runs(
        self,
        ended_before: datetime,
        *,
        limit: int = PRUNE_BATCH,
        after: str = "",
        dry_run: bool = False,
    ) -> Sequence[str]:
        """Delete up to ``limit`` runs that may be pruned, with everything of theirs (state,
        tokens, history, due entries, node anchors, parks, scatter items, signal answers and
        requests), in one transaction; returns their ids, in code point order, all greater than
        ``after``. With ``dry_run`` nothing is deleted (``after`` pages through them).

        A run may be pruned once it has ended (:data:`ENDED_LIFECYCLES`) before ``ended_before``
        (its ``finished_at``, else its creation) and it is no subflow child of a run that has
        not ended (a child whose parent is gone may go). Flow documents stay."""

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
    async def due_of(self, run_id: str) -> Sequence[DueEntry]:
        """The run's due entries, earliest first; entries of one instant in the order they were
        set (a commit's in its order). Raises :class:`UnknownRunError`."""

    @abstractmethod
    async def next_wake(self) -> datetime | None:
        """The earliest wake instant of any run, or None (see the module's notes)."""

    @abstractmethod
    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        """Take up to ``limit`` runs whose wake instant is at or before ``now`` and that nobody
        else holds (no owner, an expired lease, or held by ``owner`` already), earliest wake
        first; each is then held by ``owner`` until ``expires``. A run taken from nobody or from
        an expired lease gets the next epoch; one ``owner`` held already keeps its epoch. A
        lease taken from another owner names it (:attr:`Lease.taken_from`).
        Claims that overlap (many workers) never hand one run to two owners.

        With :attr:`own_clock`, the store's clock is "now" (whether a wake has come, whether a
        lease has expired) and each lease runs for ``expires - now`` from it: no machine's
        clock can take a live run or claim one early. :meth:`acquire_run` and
        :meth:`renew_leases` likewise."""

    @abstractmethod
    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        """Take one run, whatever its wake instant, as :meth:`claim_runs` would; None if another
        owner's lease is still alive at ``now`` (with ``force``, taken from it all the same: its
        next commit fails with :class:`LeaseLost`) or the run has ended. Raises
        :class:`UnknownRunError`."""

    @abstractmethod
    async def renew_leases(
        self,
        owner: str,
        expires: datetime,
        *,
        now: datetime | None = None,
        run_ids: Collection[str] | None = None,
    ) -> Sequence[Lease]:
        """Extend every lease ``owner`` holds to ``expires`` (``now``: the caller's instant
        ``expires`` was reckoned from; with :attr:`own_clock`, each lease then runs for
        ``expires - now`` from the store's clock); returns them (a run taken over by another
        owner is no longer among them). ``run_ids``: only the leases of these runs (a worker
        renews the runs it drives, not one it is giving back: that lease is let expire)."""

    @abstractmethod
    async def release_runs(self, owner: str) -> Sequence[str]:
        """Give back every run ``owner`` holds (a worker stopping); returns their ids."""

    @abstractmethod
    async def lease_of(self, run_id: str) -> Lease | None:
        """Who holds the run, if anyone (an expired lease is still returned: nobody has taken
        it over yet). Raises :class:`UnknownRunError`."""

    @abstractmethod
    async def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        """Store a flow document under its id and digest, first stored at ``stored_at``; True if
        it is new. Storing the same one again changes nothing (its instant and its place among
        the documents of its id included) and returns False."""

    @abstractmethod
    async def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        """A stored flow document (raises :class:`UnknownStoredFlow`)."""

    @abstractmethod
    async def latest_flow(self, flow_id: str) -> StoredFlow:
        """The document of ``flow_id`` that was first stored last (raises
        :class:`UnknownStoredFlow` when none is)."""

    @abstractmethod
    async def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        """Every stored flow document (or those of ``flow_id``), by flow id, and for each id in
        the order they were first stored (its latest last), with how many runs were started on
        each."""

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

    @abstractmethod
    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        """Store ``request`` (unanswered, whatever its ``answer``) and, in the same transaction,
        a due entry of its run at its recorded instant, purpose ``signal``, the request's id as
        its token id; the run's wake instant is brought up to date (so its holder claims it again
        at once) and, on a shared store, other processes are told. Returns the request as stored.

        The recorded instant (``requested_at``) is the store's: with :attr:`own_clock`, that
        clock's reading under the run's lock; else the one given, but no earlier than the latest
        deadline a commit of the run fired (:attr:`Commit.fires_deadline`), so requests and
        deadline firings of a run are ordered as they were applied. The due entry is at the
        earlier of the instants given and recorded (due at once on any worker's clock). Raises
        :class:`UnknownRunError`, :class:`RunEndedError` for a run that has ended,
        :class:`StoreError` for an id stored already, and ``NotJSONError``; then nothing is
        stored."""

    @abstractmethod
    async def signal_request(self, request_id: str) -> SignalRequest | None:
        """A stored request, with its answer once it has one (None: no such request)."""

    @abstractmethod
    async def record_worker(self, worker: WorkerRecord) -> None:
        """Write a worker's heartbeat, replacing the one stored under its ``worker_id`` (raises
        ``NotJSONError`` for node ids that are not JSON text, storing nothing)."""

    @abstractmethod
    async def workers(self) -> Sequence[WorkerRecord]:
        """Every worker's last heartbeat, live or not, by ``worker_id``."""

    @abstractmethod
    async def forget_worker(self, worker_id: str) -> bool:
        """Remove a worker's heartbeat (a worker closing cleanly); False if none was stored."""

    @abstractmethod
    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        """The run's unanswered requests, oldest first (none for a run that has ended, or an
        unknown one)."""


def _nothing() -> None:
    """Nothing to stop."""
