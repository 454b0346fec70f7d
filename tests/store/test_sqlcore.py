"""The SQL store core (flowtide.store.sqlcore) without a database: the statements it runs are
named alike in both backends' queries.sql, and one decoder reads both backends' rows."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from flowtide.store.base import (
    Commit,
    EventRecord,
    Lease,
    ParkRecord,
    ParkStatus,
    RequestAnswer,
    RunRecord,
    SignalAnswer,
    SignalRequest,
    StoredFlow,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
    UnknownStoredFlow,
    WorkerRecord,
)
from flowtide.store.checks import RunFacts
from flowtide.store.postgres.queries import OWN_QUERIES as POSTGRES_OWN
from flowtide.store.postgres.queries import Q as POSTGRES_QUERIES
from flowtide.store.postgres.rows import DIALECT as POSTGRES
from flowtide.store.sqlcore import commits, pruning, requests
from flowtide.store.sqlcore.connector import Row, run_rows
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.facts import fact_reads, fill_facts
from flowtide.store.sqlcore.flows import SQLFlows
from flowtide.store.sqlcore.leases import SQLLeases
from flowtide.store.sqlcore.params import Dialect, Params, encode_commit
from flowtide.store.sqlcore.reads import SQLReads
from flowtide.store.sqlcore.rows import (
    anchor_of_row,
    event_of_row,
    lease_of_row,
    park_of_row,
    run_of_row,
    token_of_row,
)
from flowtide.store.sqlcore.script import Ask, Script
from flowtide.store.sqlcore.workers import SQLWorkers
from flowtide.store.sqlfiles import COMMIT_QUERIES
from flowtide.store.sqlite.rows import DIALECT as SQLITE
from flowtide.store.sqlite.sql import OWN_QUERIES as SQLITE_OWN
from flowtide.store.sqlite.sql import QUERIES as SQLITE_QUERIES

T = TypeVar("T")
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
SHARED = set(SQLITE_QUERIES) - SQLITE_OWN


class Recording:
    """A connector that runs nothing: it keeps the names asked for and gives back ``rows`` (a
    script: ``answers`` of a statement's name, else ``rows``)."""

    def __init__(
        self,
        dialect: Dialect,
        rows: Sequence[Row] = (),
        answers: dict[str, Sequence[Row]] | None = None,
    ) -> None:
        self.names: list[str] = []
        self.rows = list(rows)
        self.answers = answers or {}
        self._dialect = dialect

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    async def read(self, name: str, params: Params) -> Sequence[Row]:
        self.names.append(name)
        return self.rows

    async def read_together(self, reads: Sequence[tuple[str, Params]]) -> list[Sequence[Row]]:
        self.names.extend(name for name, _ in reads)
        return [self.rows for _ in reads]

    async def write(self, name: str, params: Params, *, tell: bool = False) -> Sequence[Row]:
        self.names.append(name)
        return self.rows

    async def transact(self, script: Script[T], *, tell: bool = False) -> T:
        """Drive ``script``, each statement it asks for giving back ``rows``."""
        try:
            step = next(script)
            while True:
                if isinstance(step, Ask):
                    self.names.extend(name for name, _ in step.queries)
                    step = script.send([self.answers.get(n, self.rows) for n, _ in step.queries])
                else:
                    self.names.extend(name for name, _ in step.statements)
                    step = script.send([])
        except StopIteration as done:
            answer: T = done.value
            return answer


def test_both_backends_name_the_same_statements_but_their_own() -> None:
    assert set(SQLITE_QUERIES) - SQLITE_OWN == set(POSTGRES_QUERIES) - POSTGRES_OWN
    assert not SQLITE_OWN & set(POSTGRES_QUERIES)
    assert not POSTGRES_OWN & set(SQLITE_QUERIES)
    assert set(COMMIT_QUERIES) <= SHARED


ARGS: dict[str, Any] = {
    "run_id": "r",
    "lifecycle": None,
    "prefix": "r",
    "limit": 3,
    "statuses": [TokenStatus.READY],
    "token_id": "r.1",
    "after": 0,
    "placement": "p",
    "item": None,
    "key": "k",
    "open_only": False,
    "request_id": "q",
    "progress": "p",
    "owner": "w",
    "now": T0,
    "expires": T0 + timedelta(seconds=5),
    "force": False,
    "own_clock": False,
    "flow_id": "f",
    "digest": "d",
    "flow": StoredFlow("f", "1", "d", {}),
    "stored_at": None,
    "ended_before": T0,
    "worker": WorkerRecord("w", "h", 1, T0, T0, 5.0, 0),
    "worker_id": "w",
    "run_ids": ["r"],
}


@pytest.mark.parametrize("part", [SQLReads, SQLLeases, SQLFlows, SQLWorkers])
async def test_every_statement_the_core_runs_is_in_both_backends(part: type) -> None:
    db = Recording(SQLITE)
    core = part(db)
    for name, method in inspect.getmembers(core, inspect.iscoroutinefunction):
        if name.startswith("_"):
            continue
        wanted = inspect.signature(method).parameters
        # (No rows: nothing of the kind.)
        with contextlib.suppress(UnknownRunError, UnknownStoredFlow, IndexError):
            await method(**{arg: ARGS[arg] for arg in wanted})
    assert db.names
    assert [name for name in db.names if name not in SHARED] == []


async def test_every_statement_the_cores_scripts_run_is_in_both_backends() -> None:
    """A commit, a new run, a signal request and a prune, each written once, run only statements
    both backends name."""
    run = RunRecord("r", "f", "1", "running", T0)
    lease = Lease("r", "w", 1, T0)
    c = Commit(
        "r",
        run=run,
        tokens=[TokenRecord("r.1", "r", "p", TokenStatus.READY)],
        state={"n": 1},
        state_deleted=["m"],
        events=[EventRecord("node_started", "r", T0, "p", 1, "r.1")],
        expect={"r.1": TokenStatus.READY},
        signal_answers=[SignalAnswer("k", "r", {})],
        requests_answered=[RequestAnswer("q1", {}, T0)],
        fires_deadline=T0,
        lease=lease,
        release=True,
    )
    for d in (SQLITE, POSTGRES):
        facts: dict[str, Sequence[Row]] = {
            "advance_run": [("running", "w", 1, 0)],
            "expected_tokens": [("r.1", "ready", None, None)],
            "answered_keys": [],
            "unanswered_requests": [("q1", None)],
            "deadline_check": [(None, None)],
        }
        seq = Recording(d, answers=facts)
        script = commits.apply_commit(encode_commit(c, d), d, own_clock=False)
        assert await seq.transact(script) == 1
        new = Recording(d, [(False,)])
        creation = Creation.of(run, {"n": 1}, Commit("r", state={"m": 2}), lease, d)
        assert await new.transact(commits.create_run(creation, d, check=True)) == 1
        stored: dict[str, Sequence[Row]] = {
            "run_for_request": [("running",)],
            "insert_request": [(d.instant(T0),)],
        }
        request = Recording(d, answers=stored)
        asked = SignalRequest("q", "r", T0, {"placement": "p"})
        assert await request.transact(requests.request_signal(asked, d, own_clock=False)) == asked
        pruned = Recording(d, [("r",)])
        assert await pruned.transact(pruning.prune_runs(T0, 5, "", d)) == ["r"]
        names = seq.names + new.names + request.names + pruned.names
        assert {"advance_run", "settle_run", "note_deadline_fired"} <= set(names)
        assert {"insert_request", "set_due", "prune_runs", "lock_pruned"} <= set(names)
        assert [name for name in names if name not in SHARED] == []


def sqlite_us(when: datetime) -> int:
    return SQLITE.instant(when)  # type: ignore[no-any-return]


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_one_decoder_reads_both_backends_rows(dialect: Dialect) -> None:
    at = dialect.instant
    run = (
        "r", "f", "1", "running", at(T0), None, at(T0), None, None, None, 0, None,
        "null", '{"a":1}', "null",
    )  # fmt: skip
    assert run_of_row(run, dialect) == RunRecord(
        id="r",
        flow_id="f",
        flow_version="1",
        lifecycle="running",
        created_at=T0,
        started_at=T0,
        options={"a": 1},
    )
    token = ("r.1", "p", "ready", 1, 0, "[]", None, at(T0), None, '{"x":[1]}', 2)
    assert token_of_row("r", token, dialect) == TokenRecord(
        "r.1", "r", "p", TokenStatus.READY, 1, 0, due=T0, data={"x": [1]}, epoch=2
    )
    event = (7, "node_started", at(T0), "p", 1, "r.1", "{}")
    assert event_of_row("r", event, dialect) == EventRecord(
        "node_started", "r", T0, "p", 1, "r.1", {}, seq=7
    )
    park = ("k1", "r", "r.1", "p", 0, 1, at(T0), None, "k", "null", "parked", None, None)
    assert park_of_row(park, dialect) == ParkRecord(
        "k1", "r", "r.1", "p", 0, 1, T0, key="k", status=ParkStatus.PARKED
    )
    anchor = anchor_of_row("r", ("p", dialect.anchor_item("i"), at(T0)), dialect)
    assert (anchor.placement, anchor.item, anchor.at) == ("p", "i", T0)
    assert lease_of_row(("r", "w", 2, at(T0), "v"), dialect) == Lease("r", "w", 2, T0, "v")
    assert lease_of_row(("r", "w", 2, at(T0)), dialect) == Lease("r", "w", 2, T0)
    assert lease_of_row(("r", None, 2, None), dialect) is None


def test_instants_differ_only_in_how_they_are_kept() -> None:
    assert sqlite_us(T0) == 1767323045678901
    assert SQLITE.read_instant(sqlite_us(T0)) == T0 == POSTGRES.read_instant(T0)
    assert SQLITE.duration(timedelta(seconds=2)) == 2_000_000
    assert SQLITE.read_anchor_item(SQLITE.anchor_item(None)) is None


async def test_a_read_of_a_runs_rows_tells_an_unknown_run_from_one_without_rows() -> None:
    with pytest.raises(UnknownRunError):
        await run_rows(Recording(SQLITE), "tokens", {"run_id": "r"})
    assert await run_rows(Recording(SQLITE, [(None,) * 11]), "tokens", {"run_id": "r"}) == []
    rows = [("r.1",), ("r.2",)]
    assert await run_rows(Recording(SQLITE, rows), "tokens", {"run_id": "r"}) == rows


def test_a_plain_step_reads_no_facts_and_a_checked_commit_reads_them_by_shared_names() -> None:
    assert fact_reads(Commit("r"), SQLITE, creating=False) == {}
    c = Commit(
        "r",
        expect={"r.1": TokenStatus.READY},
        signal_answers=[SignalAnswer("k", "r", {})],
        requests_answered=[RequestAnswer("q1", {}, T0), RequestAnswer("q2", {}, T0)],
        fires_deadline=T0,
    )
    reads = fact_reads(c, POSTGRES, creating=False)
    assert set(reads) <= SHARED
    assert set(fact_reads(c, SQLITE, creating=True)) == {"answered_keys", "unanswered_requests"}
    facts = RunFacts("running")
    found: dict[str, Sequence[Row]] = {
        "expected_tokens": [("r.1", "ready", 2, sqlite_us(T0))],
        "answered_keys": [("k",)],
        "unanswered_requests": [("q1", "answered")],
        "deadline_check": [(None, "q0")],
    }
    fill_facts(facts, c, found, SQLITE)
    assert facts.tokens == {"r.1": ("ready", 2, T0)}
    assert set(facts.answered) == {"k"}
    assert facts.unanswerable == {"q1": "answered", "q2": "unknown"}
    assert (facts.clock, facts.request_before) == (None, "q0")
