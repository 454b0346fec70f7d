"""What a checked commit writes, as the SQL stores' statements (by the names of
:data:`flowtide.store.sqlfiles.COMMIT_QUERIES`), in the order of :meth:`Store.commit`, ended by
``settle_run`` (the release, the wake instant, and on PostgreSQL the notice to other
processes): each store runs the list in its own way (SQLite in its thread, PostgreSQL in a
pipeline).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from flowtide.store.base import ENDED_LIFECYCLES, RUNNABLE_LIFECYCLES, Commit
from flowtide.store.sqlcore.params import Dialect, EncodedCommit, Params
from flowtide.store.sqlcore.script import Statement

__all__ = [
    "MANY_ROWS",
    "Statement",
    "by_holder",
    "commit_writes",
    "due_writes",
    "event_rows",
    "last_of_each",
    "lifecycles",
    "settle",
    "settle_woken",
    "settling",
]

MANY_ROWS = frozenset({"put_token", "put_state", "insert_event"})
"""Inserts whose rows a store may write many a statement (:mod:`flowtide.store.multirow`):
PostgreSQL does (one statement instead of one per row in the pipeline); SQLite binds one
prepared statement again for each row, which costs it less."""


@cache
def lifecycles(d: Dialect) -> Params:
    """The lifecycles a statement tells runs apart by (``ended``, ``runnable``), as ``d`` binds
    them (made once)."""
    return {
        "ended": d.array(sorted(ENDED_LIFECYCLES)),
        "runnable": d.array(sorted(RUNNABLE_LIFECYCLES)),
    }


def by_holder(c: Commit) -> bool:
    """Whether ``c`` comes from its run's holder (under its lease, or taking it)."""
    return c.lease is not None or c.take is not None


def settle(run_id: str, d: Dialect, *, release: bool, tell: bool, by_holder: bool) -> Statement:
    """``settle_run`` for one run: its lease given back if ``release``, its wake instant brought
    up to date. Other processes are told (PostgreSQL's notice) if ``tell`` (someone elsewhere
    may wait for what changed), or if the run needs a worker sooner than it did, unless the
    commit is ``by_holder`` (made under the run's lease: its holder knows)."""
    params = {"run_id": run_id, "release": release, "tell": tell, "by_holder": by_holder}
    return ("settle_run", [params | lifecycles(d)])


def commit_writes(
    p: EncodedCommit,
    d: Dialect,
    ended: bool | None,
    last_seq: int | None = None,
    *,
    by_holder: bool,
    settled: bool = False,
    taken: bool = False,
) -> list[Statement]:
    """The statements that write ``p`` (checked) after its run's counter was advanced.
    ``ended``: whether its run has ended, as stored before the commit (None: not known, as for
    a commit sent before its run was read); the run record the commit writes, if any, decides
    instead. An ended run keeps no due entry. Each event has its ``back`` (how many of the
    commit's events come after it: the statement numbers it from the run's counter) and, if
    ``last_seq`` (the seq the commit's events follow) is known, its ``seq``. The run is settled
    (:func:`settle`) if the commit changed what its wake depends on, or tells others, or if
    ``settled`` (a new run); so is each run it wakes. ``by_holder``: see :func:`settle`.
    ``taken``: the lease the commit takes was taken already, by the statement that advanced the
    run's counter."""
    c = p.commit
    run_id = c.run_id
    writes: list[Statement] = []
    add = writes.append
    # (Most commits carry a token and an event or two: each part is looked at before anything
    # is made for it, so a part a commit does not carry costs one test.)
    if p.take is not None and not taken:
        add(("take_lease", [p.take]))
    if p.run is not None:
        add(("write_run", [p.run]))
        ended = bool(p.run["ended"])
    tokens = p.tokens
    if tokens:
        add(("put_token", last_of_each(tokens) if len(tokens) > 1 else list(tokens)))
    if p.state:
        add(("put_state", list(p.state)))
    if c.state_deleted:
        add(("delete_state", [{"run_id": run_id, "keys": d.array(list(c.state_deleted))}]))
    if p.events:
        add(("insert_event", event_rows(p.events, last_seq)))
    if ended:
        add(("delete_all_due", [{"run_id": run_id}]))
    elif c.due_cleared or c.due_dropped or p.due_fired or p.due:
        writes.extend(due_writes(p, d, ended))
    if p.anchors:
        add(("put_anchor", list(p.anchors)))
    if p.anchors_released:
        add(("release_anchor", list(p.anchors_released)))
    if p.scatter:
        add(("put_scatter_item", list(p.scatter)))
    if p.parks:
        add(("put_park", list(p.parks)))
    if p.answers:
        # In key order, as every commit takes them: two commits answering the same keys wait
        # for one another instead of deadlocking.
        add(("insert_answer", sorted(p.answers, key=_key)))
    if p.requests:
        add(("answer_request", list(p.requests)))
    if p.wakes:
        add(("wake_due", [w | lifecycles(d) for w in p.wakes]))
    if c.fires_deadline is not None:
        add(("note_deadline_fired", [{"run_id": run_id, "at": d.instant(c.fires_deadline)}]))
    settles, tell = settling(p, settled=settled)
    if settles:
        add(settle(run_id, d, release=c.release, tell=tell, by_holder=by_holder))
    if c.wakes:
        writes.extend(settle_woken(p, d))
    return writes


def event_rows(events: list[Params], last_seq: int | None) -> list[Params]:
    """``events``, each with its ``back`` (how many come after it) and, if ``last_seq`` (the seq
    they follow) is known, its ``seq``."""
    last = len(events) - 1
    for i, event in enumerate(events):
        event["back"] = last - i
        if last_seq is not None:
            event["seq"] = last_seq + 1 + i
    return list(events)


def due_writes(p: EncodedCommit, d: Dialect, ended: bool | None) -> list[Statement]:
    """The statements that change the due entries of ``p``'s run (not ended: ``ended`` is False,
    or None if not known)."""
    c, run_id = p.commit, p.commit.run_id
    writes: list[Statement] = []
    if c.due_cleared:
        writes.append(
            ("clear_due", [{"run_id": run_id, "token_ids": d.array(list(c.due_cleared))}])
        )
    if c.due_dropped:
        writes.append(("drop_due", [_due(run_id, t, purpose) for t, purpose in c.due_dropped]))
    if p.due_fired:
        writes.append(("fire_due", list(p.due_fired)))
    if p.due:
        writes.append(("set_due", list(p.due)))
        if ended is None:
            writes.append(("delete_due_if_ended", [{"run_id": run_id} | lifecycles(d)]))
    return writes


def settling(p: EncodedCommit, *, settled: bool = False) -> tuple[bool, bool]:
    """Whether ``p``'s run is settled (:func:`settle`) after its writes: if the commit changed
    what its wake depends on, or tells others, or if ``settled`` (a new run); and whether others
    are told (who waits elsewhere for an answer or for the run's end is told at once)."""
    c = p.commit
    tell = bool(p.answers or p.requests) or (p.run is not None and bool(p.run["ended"]))
    due_changed = c.due_cleared or c.due_dropped or c.due_fired or c.due
    changed = p.run is not None or c.release or c.take is not None
    return bool(settled or due_changed or changed or tell), tell


def settle_woken(p: EncodedCommit, d: Dialect) -> list[Statement]:
    """``settle_run`` for each other run ``p`` wakes (after its ``wake_due``): whoever holds
    it, or any worker, is told at once."""
    woken = dict.fromkeys(e.run_id for e in p.commit.wakes)
    return [settle(r, d, release=False, tell=True, by_holder=False) for r in woken]


def _due(run_id: str, token_id: str, purpose: str) -> Params:
    return {"run_id": run_id, "token_id": token_id, "purpose": purpose}


def _key(params: Params) -> Any:
    return params["key"]


def last_of_each(rows: list[Params], *key: str) -> list[Params]:
    """Each row once (by the columns ``key``, ``id`` if none are named), as last written, in the
    place it was first written (one statement may not update a row twice)."""
    names = key or ("id",)
    last: dict[tuple[Any, ...], Params] = {}
    for params in rows:
        last[tuple(params[name] for name in names)] = params
    return list(last.values())
