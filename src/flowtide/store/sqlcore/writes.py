"""What a checked commit writes, as the SQL stores' statements (by the names of
:data:`flowtide.store.sqlfiles.COMMIT_QUERIES`), in the order of :meth:`Store.commit`: each store
runs the list in its own way (SQLite in its thread, PostgreSQL in a pipeline), and ends it with
its own ``settle_run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowtide.store.base import ENDED_LIFECYCLES
from flowtide.store.sqlcore.params import Dialect, EncodedCommit, Params

__all__ = ["MANY_ROWS", "Statement", "commit_writes"]

Statement = tuple[str, list[Params]]
"""A statement by name, run once for each set of parameters (see :data:`MANY_ROWS`)."""

MANY_ROWS = frozenset({"put_token", "put_state", "insert_event"})
"""Inserts whose rows a store may write many a statement (:mod:`flowtide.store.multirow`):
PostgreSQL does (one statement instead of one per row in the pipeline); SQLite binds one
prepared statement again for each row, which costs it less."""

_ENDED = sorted(ENDED_LIFECYCLES)


def commit_writes(
    p: EncodedCommit, d: Dialect, ended: bool | None, last_seq: int | None = None
) -> list[Statement]:
    """The statements that write ``p`` (checked) after its run's counter was advanced.
    ``ended``: whether its run has ended, as stored before the commit (None: not known, as for
    a commit sent before its run was read); the run record the commit writes, if any, decides
    instead. An ended run keeps no due entry. Each event has its ``back`` (how many of the
    commit's events come after it: the statement numbers it from the run's counter) and, if
    ``last_seq`` (the seq the commit's events follow) is known, its ``seq``."""
    c = p.commit
    run_id = c.run_id
    writes: list[Statement] = []

    def add(name: str, rows: Sequence[Params]) -> None:
        if rows:
            writes.append((name, list(rows)))

    if p.take is not None:
        add("take_lease", [p.take])
    if p.run is not None:
        add("write_run", [p.run])
        ended = bool(p.run["ended"])
    add("put_token", _last_of_each(p.tokens))
    add("put_state", p.state)
    if c.state_deleted:
        add("delete_state", [{"run_id": run_id, "keys": d.array(list(c.state_deleted))}])
    for back, event in enumerate(reversed(p.events)):
        event["back"] = back
    if last_seq is not None:
        for seq, event in enumerate(p.events, last_seq + 1):
            event["seq"] = seq
    add("insert_event", p.events)
    if ended:
        add("delete_all_due", [{"run_id": run_id}])
    else:
        if c.due_cleared:
            add("clear_due", [{"run_id": run_id, "token_ids": d.array(list(c.due_cleared))}])
        add("drop_due", [_due(run_id, t, purpose) for t, purpose in c.due_dropped])
        add("fire_due", p.due_fired)
        add("set_due", p.due)
        if ended is None and p.due:
            add("delete_due_if_ended", [{"run_id": run_id, "ended": d.array(_ENDED)}])
    add("put_anchor", p.anchors)
    add("release_anchor", p.anchors_released)
    add("put_scatter_item", p.scatter)
    add("put_park", p.parks)
    # In key order, as every commit takes them: two commits answering the same keys wait for
    # one another instead of deadlocking.
    add("insert_answer", sorted(p.answers, key=_key))
    add("answer_request", p.requests)
    add("wake_due", [{**w, "ended": d.array(_ENDED)} for w in p.wakes])
    return writes


def _due(run_id: str, token_id: str, purpose: str) -> Params:
    return {"run_id": run_id, "token_id": token_id, "purpose": purpose}


def _key(params: Params) -> Any:
    return params["key"]


def _last_of_each(tokens: list[Params]) -> list[Params]:
    """Each token once, as last written, in the place it was first written (one statement may
    not update a row twice)."""
    last: dict[str, Params] = {}
    for params in tokens:
        last[params["id"]] = params
    return list(last.values())
