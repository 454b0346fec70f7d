"""Several steps of a run in one commit: which commits may be stored together, and the one
commit that does what they do one after another.

Steps of a run decide one at a time (under its step lock), each on the view the steps before it
left. When steps are queued behind one another (the branches of a split arriving at their join,
say), the commit of each but the last may wait for the next, and the last stores them all in
one transaction (:class:`~flowtide.engine.run.committer.Committer`). That transaction must leave
the store as the commits would have, applied in order, and fail only as they would.

So a commit that may fail for a reason of its own (taking the lease, an expectation on a token, a
deadline fired, a signal's or a request's answer: a race another actor may win) is never put with
others: it would take them down with it. Nor is one whose effect is seen outside the run (its end,
giving back its lease, waking another run) kept waiting for the next. And two commits whose effects
a store would apply in another order than theirs, once put together (a due entry set by the first
and dropped by the second, a node anchor released by the first and stored by the second), are stored
one after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any, TypeVar

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    Commit,
    DueEntry,
    NodeAnchor,
    ParkRecord,
    ScatterItemRecord,
    TokenRecord,
)
from flowtide.store.jsonvalues import EncodedState

R = TypeVar("R")


def racing(c: Commit) -> bool:
    """Whether ``c`` may be refused by the store for a reason of its own: it takes its run's
    lease, expects tokens as they are, fires a deadline, or records a signal's or a request's
    answer."""
    return bool(
        c.take is not None
        or c.expect
        or c.fires_deadline is not None
        or c.signal_answers
        or c.requests_answered
    )


def may_wait(c: Commit) -> bool:
    """Whether ``c`` may wait to be stored with the commits of the steps queued after it: it
    races no one, and nothing outside the run waits for it (an end, a lease given back, a run
    woken)."""
    ends = c.run is not None and c.run.lifecycle in ENDED_LIFECYCLES
    return not (racing(c) or c.release or c.wakes or ends)


def as_decided(c: Commit) -> None:
    """Keep in ``c`` its records as its step left them (copies of the run's token, run and park
    records, which later steps change in memory): a commit held back is stored as it was
    decided, whether it is sent alone or with the commits after it."""
    if c.tokens:
        c.tokens = [_decided(t) for t in c.tokens]
    if c.run is not None:
        c.run = replace(c.run)
    if c.parks:
        c.parks = [replace(p) for p in c.parks]


_token_fields = attrgetter(*(f.name for f in fields(TokenRecord)))
"""A token's fields in the order its class takes them (read in one call: a commit held back
copies the tokens it writes, one per branch of a split arriving at its join)."""


def _decided(t: TokenRecord) -> TokenRecord:
    """A copy of ``t`` with data of its own (marks change a token's data in place)."""
    copy = TokenRecord(*_token_fields(t))
    copy.data = dict(t.data)
    return copy


class CommitGroup:
    """Commits of steps one after another (the first :func:`may_wait`), to be stored as one
    (:meth:`commit`) where they may be (:meth:`accepts`). Each commit but the last is kept
    :func:`as_decided` by who holds it back."""

    __slots__ = ("_due", "_due_tokens", "_parts", "_released")

    def __init__(self, first: Commit) -> None:
        self._parts: list[Commit] = []
        self._due: set[tuple[str, str]] = set()
        self._due_tokens: set[str] = set()
        self._released: set[tuple[str, str | None]] = set()
        self.add(first)

    def accepts(self, c: Commit) -> bool:
        """Whether ``c`` (a later step's commit) may be stored in one transaction with the
        group's commits as if each was stored alone, in order."""
        first = self._parts[0]
        if racing(c) or c.lease != first.lease or c.run_lifecycles != first.run_lifecycles:
            return False
        if self._due and (c.due_cleared or c.due_dropped or c.due_fired):
            # A store drops due entries before it sets them: one set by the group and dropped
            # by ``c`` would stay.
            if any(t in self._due_tokens for t in c.due_cleared):
                return False
            if any(key in self._due for key in c.due_dropped):
                return False
            if any((e.token_id, e.purpose) in self._due for e in c.due_fired):
                return False
        # (A store stores node anchors before it releases them.)
        released = self._released
        return not (released and any((a.placement, a.item) in released for a in c.anchors))

    def add(self, c: Commit) -> None:
        """``c`` comes next in the group (it :meth:`accepts` it)."""
        self._parts.append(c)
        for e in c.due:
            self._due.add((e.token_id, e.purpose))
            self._due_tokens.add(e.token_id)
        self._released.update(c.anchors_released)

    def commit(self) -> Commit:
        """One commit that does what the group's commits do, one after another."""
        parts = self._parts
        if len(parts) == 1:
            return parts[0]
        last = parts[-1]
        run = next((c.run for c in reversed(parts) if c.run is not None), None)
        state, deleted = _state(parts)
        return Commit(
            last.run_id,
            run=run,
            tokens=_last_of_each((t for c in parts for t in c.tokens), _token_key),
            state=state,
            state_deleted=deleted,
            events=[e for c in parts for e in c.events],
            due=_last_of_each((e for c in parts for e in c.due), _due_key),
            due_cleared=[t for c in parts for t in c.due_cleared],
            due_dropped=[d for c in parts for d in c.due_dropped],
            wakes=[e for c in parts for e in c.wakes],
            anchors=_first_of_each(a for c in parts for a in c.anchors),
            anchors_released=[a for c in parts for a in c.anchors_released],
            scatter=_last_of_each((r for c in parts for r in c.scatter), _item_key),
            parks=_last_of_each((p for c in parts for p in c.parks), _park_key),
            due_fired=[e for c in parts for e in c.due_fired],
            lease=last.lease,
            release=last.release,
            run_lifecycles=last.run_lifecycles,
        )


def _state(parts: Sequence[Commit]) -> tuple[EncodedState | None, list[str]]:
    """The state keys set and deleted by ``parts`` one after another: a key is as the last
    part that writes it has it (set, or deleted)."""
    merged = EncodedState()
    deleted: dict[str, None] = {}
    for c in parts:
        if c.state:
            merged.update(c.state)
            texts = c.state.json if isinstance(c.state, EncodedState) else {}
            for key in c.state:
                deleted.pop(key, None)
                text = texts.get(key)
                if text is None:
                    merged.json.pop(key, None)  # (a value without its text: the store encodes it)
                else:
                    merged.json[key] = text
        for key in c.state_deleted:
            merged.pop(key, None)
            merged.json.pop(key, None)
            deleted[key] = None
    return (merged or None), list(deleted)


def _last_of_each(records: Iterable[R], key: Callable[[R], Any]) -> list[R]:
    """``records`` in order, each key once: where it first came, as it last was (a store
    writes a record once per commit)."""
    kept: dict[Any, R] = {}
    for record in records:
        kept[key(record)] = record
    return list(kept.values())


def _first_of_each(anchors: Iterable[NodeAnchor]) -> list[NodeAnchor]:
    """``anchors`` in order, each once, as it first came (a node anchor is stored once: its
    first arrival)."""
    kept: dict[tuple[str, str | None], NodeAnchor] = {}
    for anchor in anchors:
        kept.setdefault((anchor.placement, anchor.item), anchor)
    return list(kept.values())


def _token_key(t: TokenRecord) -> str:
    return t.id


def _due_key(e: DueEntry) -> tuple[str, str]:
    return (e.token_id, e.purpose)


def _item_key(r: ScatterItemRecord) -> tuple[str, int]:
    return (r.progress, r.index)


def _park_key(p: ParkRecord) -> str:
    return p.id
