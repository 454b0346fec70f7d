"""What a commit is checked against (:class:`~flowtide.store.checks.RunFacts`), read by the same
named statements in both SQL stores and made from their rows once: :func:`fact_reads` says
which statements a commit needs (none for a plain step), :func:`fill_facts` reads their rows.
Each store runs them its own way (SQLite in its write transaction, PostgreSQL in the pipeline
after the run's row is locked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flowtide.store.base import Commit
from flowtide.store.checks import RunFacts
from flowtide.store.sqlcore.connector import Row
from flowtide.store.sqlcore.params import Dialect, Params

__all__ = ["fact_reads", "fill_facts"]


def fact_reads(c: Commit, d: Dialect, *, creating: bool) -> dict[str, Params]:
    """The statements that read what ``c`` is checked against, by name, with their parameters
    (``creating``: its run does not exist yet, so only its signal keys are read)."""
    reads: dict[str, Params] = {}
    if c.expect and not creating:
        reads["expected_tokens"] = {"run_id": c.run_id, "ids": d.array(list(c.expect))}
    if c.signal_answers:
        reads["answered_keys"] = {"keys": d.array([a.key for a in c.signal_answers])}
    if c.requests_answered:
        ids = [a.request_id for a in c.requests_answered]
        reads["unanswered_requests"] = {"run_id": c.run_id, "ids": d.array(ids)}
    if c.fires_deadline is not None and not creating:
        reads["deadline_check"] = {"run_id": c.run_id, "at": d.instant(c.fires_deadline)}
    return reads


def fill_facts(facts: RunFacts, c: Commit, found: Mapping[str, Sequence[Row]], d: Dialect) -> None:
    """Set in ``facts`` what the rows ``found`` by :func:`fact_reads`' statements say."""
    if (tokens := found.get("expected_tokens")) is not None:
        facts.tokens = {r[0]: (r[1], r[2], d.maybe_read_instant(r[3])) for r in tokens}
    if (answered := found.get("answered_keys")) is not None:
        facts.answered = {r[0] for r in answered}
    if (requests := found.get("unanswered_requests")) is not None:
        why: dict[str, str | None] = {r[0]: r[1] for r in requests}
        refused = {a.request_id: why.get(a.request_id, "unknown") for a in c.requests_answered}
        facts.unanswerable = {key: no for key, no in refused.items() if no is not None}
    if (deadline := found.get("deadline_check")) is not None:
        clock, before = deadline[0]
        facts.clock = d.maybe_read_instant(clock)
        facts.request_before = before
