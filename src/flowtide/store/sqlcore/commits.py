"""A commit and a new run as the SQL stores apply them, written once as scripts
(:mod:`flowtide.store.sqlcore.script`) each backend drives in one write transaction: the facts
the commit is checked against read (its run's row first: its lifecycle, lease and history
counter, advanced), the checks every store runs (:func:`flowtide.store.checks.check_commit`),
then the writes (:func:`flowtide.store.sqlcore.writes.commit_writes`). On PostgreSQL that is
the careful way, two round trips; a commit whose checks its guards can make goes whole instead
(:mod:`flowtide.store.postgres.commits`)."""

from __future__ import annotations

from collections.abc import Sequence

from flowtide.store.base import ENDED_LIFECYCLES, EventRecord, UnknownRunError
from flowtide.store.checks import RunFacts, check_commit
from flowtide.store.sqlcore.creation import Creation
from flowtide.store.sqlcore.facts import fact_reads, fill_facts
from flowtide.store.sqlcore.params import Dialect, EncodedCommit
from flowtide.store.sqlcore.script import Ask, Put, Script
from flowtide.store.sqlcore.writes import by_holder, commit_writes

__all__ = ["apply_commit", "create_run", "numbered"]


def apply_commit(p: EncodedCommit, d: Dialect, *, own_clock: bool) -> Script[int]:
    """Apply ``p`` to its run, checked on the run as stored; the script's answer is the seq of
    its first event. ``own_clock``: a deadline it fires is judged on the database's clock too
    (else only against the requests recorded before it)."""
    c = p.commit
    reads = fact_reads(c, d, creating=False)
    advance = {"run_id": c.run_id, "events": len(c.events)}
    run, *found = yield Ask([("advance_run", advance), *reads.items()])
    if not run:
        raise UnknownRunError(c.run_id)
    lifecycle, owner, epoch, last_seq = run[0]
    facts = RunFacts(lifecycle, owner, epoch)
    if reads:  # (none for a plain step)
        fill_facts(facts, c, dict(zip(reads, found, strict=True)), d)
    if not own_clock:
        facts.clock = None  # (the deadline's instant was given on the engine's clock)
    check_commit(c, facts, not_json=p.not_json)
    ended = lifecycle in ENDED_LIFECYCLES
    yield Put(commit_writes(p, d, ended, last_seq, by_holder=by_holder(c)))
    return int(last_seq) + 1


def create_run(creation: Creation, d: Dialect, *, check: bool) -> Script[int]:
    """Insert a new run and apply its first commit with it, whole or not at all; the script's
    answer is the seq of the commit's first event. ``check``: read what may refuse it first
    (without, a run id taken already fails the insert)."""
    step = creation.step
    if check:
        reads = fact_reads(step.commit, d, creating=True)
        exists, *found = yield Ask([("run_exists", {"run_id": creation.run.id}), *reads.items()])
        facts = RunFacts(None)  # (the run is not stored yet: no lifecycle, no tokens)
        fill_facts(facts, step.commit, dict(zip(reads, found, strict=True)), d)
        creation.check(bool(exists[0][0]), facts)
    writes = commit_writes(
        step, d, creation.ended, 0, by_holder=creation.lease is not None, settled=True
    )
    yield Put([("insert_run", [creation.row]), ("put_state", creation.state), *writes])
    return 1


def numbered(events: Sequence[EventRecord], first: int) -> list[EventRecord]:
    """A commit's own event records, their ``seq`` filled in from ``first`` (as the memory store
    does, the caller's records themselves)."""
    for seq, event in enumerate(events, first):
        event.seq = seq
    return list(events)
