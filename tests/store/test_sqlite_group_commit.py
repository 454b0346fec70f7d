"""Group commit on the SQLite store: writes waiting together share one transaction, and each
still gets its own answer (applied, or refused with its own error), in call order, answered only
once the transaction has committed."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from flowtide.store import Commit, Lease, LeaseLost, StoreConflict, StoreError, TokenStatus
from flowtide.store.base import DuplicateSignal, EventRecord, SignalAnswer, UnknownRunError
from flowtide.store.jsonvalues import NotJSONError
from flowtide.store.sqlite import SQLiteStore
from flowtide.store.sqlite.group import Write, WriteQueue, apply_group
from flowtide.store.sqlite.schema import open_database
from flowtide.testing.storechecks.support import T0, at, new_run, run_record, token

RUNS = ("r0", "r1", "r2", "r3")
ROUNDS = 40
R = TokenStatus.RUNNING
P = TokenStatus.PARKED


@dataclass
class Attempt:
    """One call of the race: ``call`` makes it; ``refused`` says, from the calls made before it
    (in call order), which error it must get (None: it must apply)."""

    name: str
    run_id: str
    call: Callable[[], Awaitable[Any]]
    refused: Callable[[list[str]], type[Exception] | None]
    marks: bool = True
    """It writes an event named ``name`` (and a state key ``name``) if it applies."""


def always(error: type[Exception] | None) -> Callable[[list[str]], type[Exception] | None]:
    return lambda before: error


def unless_after(
    name: str, error: type[Exception]
) -> Callable[[list[str]], type[Exception] | None]:
    """Refused with ``error`` once ``name`` was called before it."""
    return lambda before: error if name in before else None


def marked(run_id: str, name: str, **fields: Any) -> Commit:
    """A commit that leaves an event and a state key named ``name`` (unless ``fields`` say
    otherwise)."""
    fields.setdefault("state", {name: name})
    fields.setdefault("events", [EventRecord(name, run_id, T0)])
    return Commit(run_id, **fields)


async def prepare(store: SQLiteStore) -> dict[str, Lease]:
    """Runs with tokens 1 and 2 running, each leased to ``w``; key ``taken`` answered."""
    held = {}
    for run_id in RUNS:
        await new_run(store, run_id, state={})
        await store.commit(Commit(run_id, tokens=[token(run_id, 1), token(run_id, 2)]))
        lease = await store.acquire_run(run_id, "w", T0, at(3600))
        assert lease is not None
        held[run_id] = lease
    await store.commit(Commit("r0", signal_answers=[SignalAnswer("taken", "r0", {})]))
    return held


def attempts(store: SQLiteStore, held: dict[str, Lease]) -> list[Attempt]:
    """Every kind of write, accepted and refused, on every run (in no particular order)."""
    made: list[Attempt] = []

    def commit(name: str, run_id: str, refused: Any, **fields: Any) -> None:
        made.append(
            Attempt(name, run_id, lambda: store.commit(marked(run_id, name, **fields)), refused)
        )

    for run_id in RUNS:
        lease = held[run_id]
        for i in range(3):
            commit(f"ok{i}", run_id, always(None), expect={f"{run_id}.1": R})
        commit("stale", run_id, always(StoreConflict), expect={f"{run_id}.1": P})
        commit("lost", run_id, always(LeaseLost), lease=Lease(run_id, "x", 9, at(1)))
        answered = [SignalAnswer("taken", run_id, {})]
        commit("taken", run_id, always(DuplicateSignal), signal_answers=answered)
        commit(
            "bad",
            run_id,
            always(NotJSONError),
            events=[EventRecord("e", run_id, T0, data={"s": {1}})],
        )
        # Who answers a new key first wins it; the token moved by "park" is seen by the writes
        # called after it (those expecting it running are refused), not by those called before.
        key = [SignalAnswer(f"key-{run_id}", run_id, {})]
        commit("key-a", run_id, unless_after("key-b", DuplicateSignal), signal_answers=key)
        commit("key-b", run_id, unless_after("key-a", DuplicateSignal), signal_answers=key)
        commit(
            "park", run_id, always(None), tokens=[token(run_id, 2, P)], expect={f"{run_id}.2": R}
        )
        commit("running", run_id, unless_after("park", StoreConflict), expect={f"{run_id}.2": R})
        commit("parked", run_id, _before("park", StoreConflict), expect={f"{run_id}.2": P})
        # Once another owner forces the run away, the old lease's writes are refused.
        commit("leased", run_id, unless_after("steal", LeaseLost), lease=lease)
        made.append(
            Attempt(
                "steal",
                run_id,
                partial(store.acquire_run, run_id, "y", T0, at(9), force=True),
                always(None),
                marks=False,
            )
        )
    commit("nobody", "nope", always(UnknownRunError))
    new = run_record("new")
    for name in ("create-a", "create-b"):
        other = "create-b" if name == "create-a" else "create-a"
        made.append(
            Attempt(
                name,
                "new",
                partial(store.create_run, new, {"by": name}),
                unless_after(other, StoreError),
                marks=False,
            )
        )
    made.append(
        Attempt(
            "create-bad",
            "new",
            lambda: store.create_run(new, {"s": {1}}),
            lambda before: StoreError if before else NotJSONError,  # (it exists: said first)
            marks=False,
        )
    )
    return made


def _before(name: str, error: type[Exception]) -> Callable[[list[str]], type[Exception] | None]:
    """Refused with ``error`` unless ``name`` was called before it."""
    return lambda before: None if name in before else error


async def race(store: SQLiteStore, rng: random.Random) -> None:
    """Every attempt called at once, in a shuffled order, with a read of each run among them;
    then each answer, and what the database holds, checked against that order."""
    held = await prepare(store)
    calls = attempts(store, held)
    rng.shuffle(calls)
    for run_id in RUNS:
        read = Attempt("read", run_id, partial(store.get_state, run_id), always(None), False)
        calls.insert(rng.randrange(len(calls) + 1), read)
    outcomes: list[Any] = await asyncio.gather(*(a.call() for a in calls), return_exceptions=True)
    applied: dict[str, list[str]] = {}
    called: dict[str, list[str]] = {}
    for a, outcome in zip(calls, outcomes, strict=True):
        before = called.setdefault(a.run_id, [])
        done = applied.setdefault(a.run_id, [])
        refused = a.refused(before)
        what = f"{a.name} on {a.run_id} after {before}"
        if refused is not None:
            assert type(outcome) is refused, f"{what}: {outcome!r}, not {refused.__name__}"
        else:
            assert not isinstance(outcome, BaseException), f"{what}: {outcome!r}"
        if a.name == "read":
            assert set(done) <= set(outcome), f"{what}: a read misses writes called before it"
        elif refused is None and a.marks:
            done.append(a.name)
            assert [e.seq for e in outcome] == [len(done)], f"{what}: its event's seq"
        before.append(a.name)
    for run_id in RUNS:
        history = [e.kind for e in await store.history(run_id)]
        assert history == applied[run_id], f"{run_id}: history in call order"
        assert await store.get_state(run_id) == {name: name for name in applied[run_id]}
        assert await store.token(run_id, f"{run_id}.2") == token(run_id, 2, P)
        lease = await store.lease_of(run_id)
        assert lease is not None and lease.owner == "y"
        assert await store.signal_answer(f"key-{run_id}") is not None
    creator = next(a.name for a in calls if a.name in ("create-a", "create-b"))
    assert await store.get_state("new") == {"by": creator}


async def test_concurrent_writes_each_get_their_own_answer(tmp_path: Path) -> None:
    rng = random.Random(20260101)
    for round in range(ROUNDS):
        async with SQLiteStore(tmp_path / f"race-{round}.db") as store:
            await race(store, rng)


# -- one group, on a connection of the test's own ------------


class Faulty(sqlite3.Connection):
    """A connection whose ``COMMIT`` fails once ``fail_after`` more have passed (None: never;
    as a full disk or an I/O error would fail it), and whose ``BEGIN IMMEDIATE`` waits for
    ``go`` once ``hold`` is set (saying so on ``held``), so that writes pile up behind it."""

    fail_after: int | None = None
    hold = False

    def setup(self) -> None:
        self.row_factory = sqlite3.Row
        self.held = threading.Event()
        self.go = threading.Event()

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.fail_after is not None:
            self.fail_after -= 1
            if self.fail_after < 0:
                self.fail_after = None
                raise sqlite3.OperationalError("disk I/O error (injected)")
        if sql == "BEGIN IMMEDIATE" and self.hold:
            self.hold = False
            self.held.set()
            self.go.wait()
        return super().execute(sql, parameters)


opened: list[sqlite3.Connection] = []
"""The connections a test opened, closed when it ends (an unclosed one is a ResourceWarning)."""


@pytest.fixture(autouse=True)
def close_connections() -> Iterator[None]:
    yield
    while opened:
        opened.pop().close()


def faulty(path: Path) -> Faulty:
    """A :class:`Faulty` connection to the store at ``path`` (its schema created first)."""
    open_database(str(path), "FULL").close()
    conn = sqlite3.connect(path, isolation_level=None, factory=Faulty)
    assert isinstance(conn, Faulty)
    opened.append(conn)
    conn.setup()
    return conn


def insert(value: str, then: Callable[[], None] | None = None) -> Write[str]:
    """A write of ``value`` in table ``t`` (then ``then()``, which may raise)."""

    def work(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
        if then is not None:
            then()
        return value

    return Write(work)


def refuse() -> None:
    raise StoreConflict("refused after writing")


def table(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    opened.append(conn)
    conn.execute("CREATE TABLE t (v TEXT UNIQUE)")
    return conn


def values(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT v FROM t ORDER BY rowid")]


def future(write: Write[str]) -> Future[str]:
    """The future a test's write answers on."""
    assert isinstance(write.future, Future)
    return write.future


def answers(group: list[Write[str]]) -> list[str | type[BaseException]]:
    return [
        type(e) if (e := future(w).exception()) is not None else future(w).result() for w in group
    ]


def started(*writes: Write[str]) -> list[Write[str]]:
    """``writes`` as the queue hands them out (their futures running)."""
    queue = WriteQueue()
    for write in writes:
        queue.put(write)
    return queue.take()


def test_a_refused_write_is_rolled_back_to_its_savepoint_alone(tmp_path: Path) -> None:
    conn = table(tmp_path / "t.db")
    group = started(insert("a"), insert("b", refuse), insert("a"), insert("c"))
    apply_group(conn, group, "t.db")
    # "b" was written, then refused: rolled back; the second "a" broke a constraint (SQLite's
    # error, reported as a StoreError): rolled back; the others committed.
    assert answers(group) == ["a", StoreConflict, StoreError, "c"]
    assert values(conn) == ["a", "c"]
    assert not conn.in_transaction


def test_a_failed_commit_fails_every_write_of_its_group(tmp_path: Path) -> None:
    conn = faulty(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (v TEXT UNIQUE)")
    conn.fail_after = 0
    group = started(insert("a"), insert("b", refuse), insert("c"))
    apply_group(conn, group, "t.db")
    assert answers(group) == [StoreError, StoreError, StoreError]
    assert all("injected" in str(future(w).exception()) for w in group)
    assert values(conn) == [] and not conn.in_transaction
    group = started(insert("a"), insert("c"))
    apply_group(conn, group, "t.db")
    assert answers(group) == ["a", "c"] and values(conn) == ["a", "c"]


def test_a_write_that_loses_the_transaction_fails_its_group(tmp_path: Path) -> None:
    conn = table(tmp_path / "t.db")

    def lose() -> None:
        conn.execute("ROLLBACK")  # (as SQLite does on some errors: the transaction is gone)
        raise sqlite3.OperationalError("the transaction is gone")

    group = started(insert("a"), insert("b", lose), insert("c"))
    apply_group(conn, group, "t.db")
    assert answers(group) == [StoreError, StoreError, StoreError]
    assert values(conn) == []


def test_the_queue_hands_out_groups_in_call_order_and_drops_cancelled_writes() -> None:
    queue = WriteQueue(limit=2)
    writes = [insert(v) for v in "abcd"]
    for write in writes:
        queue.put(write)
    future(writes[1]).cancel()
    assert queue.take() == [writes[0], writes[2]]
    assert queue.take() == [writes[3]]
    assert queue.take() == []


# -- a store's writes waiting together ------------


async def test_a_store_commits_the_writes_waiting_together_and_fails_them_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Faulty] = []

    def open_faulty(path: str, synchronous: str) -> Faulty:
        made.append(faulty(Path(path)))  # (in the store's thread, which alone may use it)
        opened.remove(made[-1])  # (the store closes it, in that thread)
        return made[-1]

    monkeypatch.setattr("flowtide.store.sqlite.store.open_database", open_faulty)
    async with SQLiteStore(tmp_path / "s.db") as store:
        [conn] = made
        await new_run(store, "r", state={})
        await store.commit(Commit("r", tokens=[token("r", 1)]))
        conn.hold = True
        first = asyncio.ensure_future(store.commit(marked("r", "first")))
        await asyncio.to_thread(conn.held.wait)
        # The store's thread holds "first" alone; these wait behind it, then go as one group
        # whose COMMIT fails: each hears that failure, the refused one too.
        waiting = [
            store.commit(marked("r", "second")),
            store.commit(marked("r", "stale", expect={"r.1": P})),
            store.create_run(run_record("new"), {}),
            store.commit(marked("r", "third")),
        ]
        tasks = [asyncio.ensure_future(call) for call in waiting]
        await asyncio.sleep(0)  # (each task queues its write at its first step)
        conn.fail_after = 1  # ("first"'s COMMIT passes, the next group's fails)
        conn.go.set()
        assert [e.kind for e in await first] == ["first"]
        failed = await asyncio.gather(*tasks, return_exceptions=True)
        assert [type(e) for e in failed] == [StoreError] * 4
        assert all("injected" in str(e) for e in failed)
        assert [e.kind for e in await store.history("r")] == ["first"]
        assert await store.get_state("r") == {"first": "first"}
        assert [r.id for r in await store.list_runs()] == ["r"]
        await store.commit(marked("r", "again"))
        assert [e.kind for e in await store.history("r")] == ["first", "again"]
