"""Pruning ended runs, written once as a script (:mod:`flowtide.store.sqlcore.script`): the runs
a prune may delete found, held (PostgreSQL locks their rows, skipping those another prune took
first; SQLite's write lock holds them all), then deleted with everything of theirs."""

from __future__ import annotations

from datetime import datetime

from flowtide.store.sqlcore.params import Dialect, Params
from flowtide.store.sqlcore.script import Ask, Put, Script
from flowtide.store.sqlcore.writes import lifecycles
from flowtide.store.sqlfiles import PRUNED_TABLES

__all__ = ["prunable", "prune_runs"]


def prunable(ended_before: datetime, limit: int, after: str, d: Dialect) -> Params:
    """The parameters of ``prunable_runs``: up to ``limit`` runs, after ``after``, that ended
    before ``ended_before``."""
    return {
        "ended_before": d.instant(ended_before),
        "limit": max(limit, 0),  # (SQLite would read a negative LIMIT as none at all)
        "after": after,
    } | lifecycles(d)


def prune_runs(ended_before: datetime, limit: int, after: str, d: Dialect) -> Script[list[str]]:
    """Delete up to ``limit`` runs that may be pruned (:func:`prunable`); the script's answer is
    their ids."""
    (found,) = yield Ask([("prunable_runs", prunable(ended_before, limit, after, d))])
    if not found:
        return []
    (held,) = yield Ask([("lock_pruned", {"ids": d.array([str(row[0]) for row in found])})])
    ids = [str(row[0]) for row in held]
    if ids:
        batch = {"ids": d.array(ids)}
        yield Put([(f"prune_{table}", [batch]) for table in PRUNED_TABLES])
    return ids
