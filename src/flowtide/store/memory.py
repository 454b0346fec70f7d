"""An in-memory store: for tests and throwaway runs. Nothing survives the process.

A commit is applied without yielding to the event loop, so it is atomic with respect to other
tasks. Records are copied on the way in and out, so the engine cannot change stored data by
mutating its own objects (as with a real database).

Runs, tokens, events, parks and due entries are kept as plain tuples of their fields (enum
members as their values, mappings and lists packed: pickled to bytes by :func:`_pack`
(:mod:`flowtide.packing`), or frozen into tuples by :func:`_freeze` when pickle refuses them), and
records are built again on the way out. A tuple holding only such values is one the cyclic
garbage collector stops tracking at its first collection, so the many parked and ended runs a
process keeps cost the collector little, and a run that parks or ends moves nothing into the
older generations (whose collections walk everything in them); a run's result is packed once,
when the run ends. Events' data dicts are kept as the engine made them (it never changes them
after the commit) when a plain step commits them, because packing them there would cost every
step (a 200-node chain measured about 25 % slower per step): such a dict that holds a list (a
``node_finished`` event's ``to``) stays tracked. The other commits (a run's start, park, signal,
end: a few per run) pack the data that holds containers. And when a run parks (or ends right
after it waited), a short history becomes a tuple with every event's data packed (a tuple of
plain values is not tracked; a list, or a tuple that holds a dict, is walked item by item by
every full collection), a list again at its next event: a parked run then costs a full collection
nothing, where its history list of 20-odd fields cost about 0.6 µs.
"""

from __future__ import annotations

import heapq
import itertools
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, overload

from flowtide.packing import PROTOCOL, deep_copy, pack, unpack
from flowtide.store.base import (
    LIVE_TOKEN_STATUSES,
    Commit,
    DueEntry,
    DuplicateSignal,
    EventRecord,
    Expect,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    Store,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
    WaitingRun,
)

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """A store in this process's memory: for tests and throwaway runs (nothing survives it)."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[Any, ...]] = {}
        """run id -> the run's fields (:func:`_run_row`)."""
        self._states: dict[str, dict[str, Any] | bytes] = {}
        """run id -> its state; packed while the run waits or once it ended after waiting,
        when it holds containers (:func:`_settled_state`), and opened again by its next write."""
        self._tokens: dict[str, _TokenRows] = {}
        """run id -> its tokens' fields (:func:`_token_row`): the one token's row itself while
        the run has made one token (most runs), else token id -> row. No object of its own per
        run, then: a dict of rows would be tracked by the collector from its first write until
        a full collection, and so count, for every run that parks or ends, towards the
        survivors that start the next full collection (:func:`_put_token`)."""
        self._history: dict[str, list[Any] | tuple[Any, ...]] = {}
        """run id -> its events' fields, :data:`_EVENT_FIELDS` items each, in order, in one flat
        list: a list is always tracked, but then it is the only tracked object of a run's
        history (a row holding an event's data dict would be tracked too)."""
        self._due: dict[str, _DueItem | dict[str, _DueItem]] = {}
        """token id -> its live heap item, the item itself when the token has one (most have:
        no object of its own per token), else purpose -> item."""
        self._due_heap: list[_DueItem] = []
        """(when, seq, run id, token id, purpose) of every entry ever set; one that is not the
        live item of its token and purpose is stale and skipped (lazy deletion)."""
        self._due_seq = itertools.count()
        self._anchors: dict[tuple[str, str, str | None], datetime] = {}
        self._scatter: dict[tuple[str, str], dict[int, ScatterItemRecord]] = {}
        self._parks: dict[str, tuple[Any, ...]] = {}
        """park id -> the park's fields (:func:`_park_row`)."""
        self._parks_by_run: dict[str, str | tuple[str, ...]] = {}
        self._parks_by_key: dict[str, str | tuple[str, ...]] = {}
        """run id (key) -> its park ids: the one id itself (most runs park once), or a tuple."""
        self._answers: dict[str, SignalAnswer] = {}

    async def create_run(
        self, run: RunRecord, state: Mapping[str, Any], commit: Commit | None = None
    ) -> Sequence[EventRecord]:
        if run.id in self._runs:
            raise StoreError(f"run {run.id!r} already exists")
        self._runs[run.id] = _run_row(run)
        self._states[run.id] = dict(state)
        self._history[run.id] = []
        if commit is None:
            return ()
        if commit.run_id not in self._runs:
            raise UnknownRunError(commit.run_id)  # (as commit() says it)
        # Applied here, not through commit(): no second coroutine (and a subclass's commit sees
        # only commits, as before).
        return MemoryStore._apply(self, commit)

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        c = commit
        run_id = c.run_id
        if run_id not in self._runs:
            raise UnknownRunError(run_id)
        if (
            c.expect
            or c.run is not None
            or c.due_cleared
            or c.due_dropped
            or c.due
            or c.anchors
            or c.anchors_released
            or c.parks
            or c.signal_answers
            or c.scatter
        ):
            return self._apply(c)
        # The common shape of a step (tokens, events, perhaps state keys), as _apply does it.
        tokens = self._tokens
        for t in c.tokens:
            # Copied (_token_row, inline): the engine goes on mutating its token records.
            row = (
                t.id,
                t.run_id,
                t.placement,
                t.status._value_,
                t.attempt,
                t.visit,
                t.lineage,
                t.deadline,
                t.due,
                t.created_at,
                _pack(t.data) if t.data else None,
                t.epoch,
            )
            # (_put_token, inline: a step's token is most often the run's only one, whose id is
            # the very string its row holds.)
            mine = tokens.get(run_id)
            if type(mine) is tuple and mine[0] is t.id:
                tokens[run_id] = row
            else:
                _put_token(tokens, run_id, mine, row)
        if c.state is not None or c.state_deleted:
            state = self._states[run_id]
            if isinstance(state, bytes):
                state = self._states[run_id] = unpack(state)
            if c.state:
                state.update(c.state)
            for key in c.state_deleted:
                state.pop(key, None)
        if not c.events:
            return ()
        history = self._history[run_id]
        if not isinstance(history, list):  # a parked run's tuple (see _compacted)
            history = self._history[run_id] = list(history)
        start = len(history) // _EVENT_FIELDS
        for e in c.events:
            history += (e.kind, e.run_id, e.at, e.placement, e.attempt, e.token_id, e.data)
        # The stored events are built when asked for (most callers read one seq, if any).
        return _Stored(history, start, start + len(c.events))

    def _apply(self, c: Commit) -> Sequence[EventRecord]:
        # Every part of a commit is optional: each is looked at only when present (most steps
        # carry a token or two, events and perhaps state keys).
        run_id = c.run_id
        tokens = self._tokens
        if c.expect:
            mine = tokens.get(run_id)
            for token_id, wanted in c.expect.items():
                expect = wanted if isinstance(wanted, Expect) else Expect(wanted)
                row = _row_of(mine, token_id)
                # Checked on the row's fields: no record built for it.
                why = (
                    expect.mismatch(row[_STATUS], row[_EPOCH], row[_DEADLINE])
                    if row is not None
                    else "missing"
                )
                if why is not None:
                    raise StoreConflict(f"token {token_id!r} of run {run_id!r} is {why}")
        if c.signal_answers:
            for answer in c.signal_answers:
                if answer.key in self._answers:
                    raise DuplicateSignal(f"signal idempotency key {answer.key!r} already answered")
        if c.run is not None:
            self._runs[run_id] = _run_row(c.run)
        for t in c.tokens:
            # Copied: the engine goes on mutating its token records.
            _put_token(tokens, run_id, tokens.get(run_id), _token_row(t))
        if c.state is not None or c.state_deleted:
            state = self._states[run_id]
            if isinstance(state, bytes):
                state = self._states[run_id] = unpack(state)
            if c.state:
                state.update(c.state)
            for key in c.state_deleted:
                state.pop(key, None)
        if c.due_cleared:
            for token_id in c.due_cleared:
                self._due.pop(token_id, None)
        if c.due_dropped:
            for token_id, purpose in c.due_dropped:
                mine = self._due.get(token_id)
                if mine is None:
                    continue
                if isinstance(mine, dict):
                    mine.pop(purpose, None)
                    if not mine:
                        del self._due[token_id]
                elif mine[4] == purpose:
                    del self._due[token_id]
        if c.due:
            for entry in c.due:
                token_id = entry.token_id
                purpose = entry.purpose
                item = (entry.when, next(self._due_seq), entry.run_id, token_id, purpose)
                mine = self._due.get(token_id)
                if mine is None or (not isinstance(mine, dict) and mine[4] == purpose):
                    self._due[token_id] = item
                elif isinstance(mine, dict):
                    mine[purpose] = item
                else:
                    self._due[token_id] = {mine[4]: mine, purpose: item}
                heapq.heappush(self._due_heap, item)
        if c.anchors or c.anchors_released or c.parks or c.signal_answers:
            self._apply_parking(c)
        if c.scatter:
            for record in c.scatter:
                items = self._scatter.setdefault((record.run_id, record.token_id), {})
                items[record.index] = replace(record)
        history = self._history[run_id]
        parked_before = not isinstance(history, list)  # compacted when it parked, unchanged since
        settling = c.run is not None and (
            c.run.lifecycle == _PARKED_RUN or (parked_before and c.run.lifecycle in _ENDED_RUN)
        )
        if settling:
            self._states[run_id] = _settled_state(self._states[run_id])
        # Compacted after this commit (see _compacted), whose events are then packed with the
        # rest: packing them one by one first would be done twice.
        compacting = (
            settling
            and len(history) + len(c.events) * _EVENT_FIELDS <= _COMPACTED_EVENTS * _EVENT_FIELDS
        )
        stored: Sequence[EventRecord] = ()
        if c.events:
            if not isinstance(history, list):
                history = self._history[run_id] = list(history)
            start = len(history) // _EVENT_FIELDS
            # An event's data is not copied: the engine never changes it once it is committed.
            # Here (a run's start, park, signal or end: a few commits per run, not every step)
            # data that holds a list or a dict is packed, so that the events that end a run do
            # not keep it tracked by the collector for as long as the store keeps the run.
            for e in c.events:
                history += (
                    e.kind,
                    e.run_id,
                    e.at,
                    e.placement,
                    e.attempt,
                    e.token_id,
                    e.data if compacting else _packed_data(e.data),
                )
            # The stored events (new records, with their seqs) are built when asked for.
            stored = _Stored(history, start, start + len(c.events))
        if compacting and type(history) is list:
            self._history[run_id] = _compacted(history)
        return stored

    def _apply_parking(self, c: Commit) -> None:
        for anchor in c.anchors:
            self._anchors[(anchor.run_id, anchor.placement, anchor.item)] = anchor.at
        for placement, item in c.anchors_released:
            self._anchors.pop((c.run_id, placement, item), None)
        for park in c.parks:
            if park.id not in self._parks:
                _add_id(self._parks_by_run, park.run_id, park.id)
                if park.key is not None:
                    _add_id(self._parks_by_key, park.key, park.id)
            self._parks[park.id] = _park_row(park)
        for answer in c.signal_answers:
            self._answers[answer.key] = answer

    async def get_run(self, run_id: str) -> RunRecord:
        try:
            return _run_record(self._runs[run_id])
        except KeyError:
            raise UnknownRunError(run_id) from None

    async def list_runs(self, lifecycle: str | None = None) -> Sequence[RunRecord]:
        return [
            _run_record(r)
            for r in self._runs.values()
            if lifecycle is None or r[_LIFECYCLE] == lifecycle
        ]

    async def get_state(self, run_id: str) -> dict[str, Any]:
        try:
            state = self._states[run_id]
        except KeyError:
            raise UnknownRunError(run_id) from None
        return _copied(state)

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None = None
    ) -> Sequence[TokenRecord]:
        if run_id not in self._runs:
            raise UnknownRunError(run_id)
        rows = _rows(self._tokens.get(run_id))
        if statuses is None:
            return [_token_record(t) for t in rows]
        # Members of a StrEnum hash and compare as their values: the set matches stored ones.
        wanted = set(statuses)
        return [_token_record(t) for t in rows if t[_STATUS] in wanted]

    async def history(self, run_id: str, after: int = 0) -> Sequence[EventRecord]:
        rows = self._history.get(run_id)
        if rows is None:
            raise UnknownRunError(run_id)
        n = _EVENT_FIELDS
        if after * n >= len(rows):
            return []  # (a let-go run's rebuild or end asks for what followed its checkpoint)
        return [
            EventRecord(
                rows[i],
                rows[i + 1],
                rows[i + 2],
                rows[i + 3],
                rows[i + 4],
                rows[i + 5],
                _unpack(rows[i + 6]),
                i // n + 1,
            )
            for i in range(max(0, after) * n, len(rows), n)
        ]

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        if run_id not in self._runs:
            raise UnknownRunError(run_id)
        found = _row_of(self._tokens.get(run_id), token_id)
        return _token_record(found) if found is not None else None

    async def waiting_run(self, run_id: str, token_id: str) -> WaitingRun:
        # The rows themselves: one call, and records built only for what is asked.
        row = self._runs.get(run_id)
        if row is None:
            raise UnknownRunError(run_id)
        park = None
        ids = self._parks_by_run.get(run_id, ())
        for park_id in (ids,) if type(ids) is str else ids:
            p = self._parks[park_id]
            if p[2] == token_id and p[_PARK_STATUS] == _OPEN:
                park = _park_record(p)
                break
        live = [_token_record(t) for t in _rows(self._tokens.get(run_id)) if t[_STATUS] in _LIVE]
        return WaitingRun(
            _run_record(row),
            park,
            live,
            len(self._history[run_id]) // _EVENT_FIELDS,
            _copied(self._states[run_id]),
        )

    def _live(self, item: _DueItem) -> bool:
        mine = self._due.get(item[3])
        if mine is None:
            return False
        if isinstance(mine, dict):
            return mine.get(item[4]) is item
        return mine is item

    def _prune(self) -> None:
        heap = self._due_heap
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)

    async def next_due(self) -> datetime | None:
        self._prune()
        return self._due_heap[0][0] if self._due_heap else None

    async def claim_due(self, now: datetime, limit: int = 100) -> Sequence[DueEntry]:
        out: list[DueEntry] = []
        while len(out) < limit:
            self._prune()
            if not self._due_heap or self._due_heap[0][0] > now:
                break
            when, _, run_id, token_id, purpose = heapq.heappop(self._due_heap)
            mine = self._due[token_id]
            if isinstance(mine, dict):
                del mine[purpose]
                if not mine:
                    del self._due[token_id]
            else:
                del self._due[token_id]
            out.append(DueEntry(when, run_id, token_id, purpose))
        return out

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        return self._anchors.get((run_id, placement, item))

    async def node_anchors(self, run_id: str) -> Sequence[NodeAnchor]:
        return [
            NodeAnchor(r, placement, item, at)
            for (r, placement, item), at in self._anchors.items()
            if r == run_id
        ]

    async def parks(
        self,
        *,
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> Sequence[ParkRecord]:
        if key is not None:
            ids = self._parks_by_key.get(key, ())
        elif run_id is not None:
            ids = self._parks_by_run.get(run_id, ())
        else:
            raise StoreError("parks() needs a run_id or a key")
        if type(ids) is str:
            ids = (ids,)
        out = []
        for park_id in ids:
            park = self._parks[park_id]
            if run_id is not None and park[1] != run_id:
                continue
            if placement is not None and park[3] != placement:
                continue
            if open_only and park[_PARK_STATUS] != _OPEN:
                continue
            out.append(_park_record(park))
        return out

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        return self._answers.get(key)

    async def scatter_items(self, run_id: str, token_id: str) -> Sequence[ScatterItemRecord]:
        items = self._scatter.get((run_id, token_id), {})
        return [replace(items[i]) for i in sorted(items)]

    # -- introspection for tests ------------

    def due_entries(self) -> list[DueEntry]:
        """Every pending due entry, earliest first."""
        return sorted(
            (
                DueEntry(when, run_id, token_id, purpose)
                for mine in self._due.values()
                for when, _, run_id, token_id, purpose in (
                    mine.values() if isinstance(mine, dict) else (mine,)
                )
            ),
            key=lambda e: e.when,
        )


# -- rows: records as plain tuples ------------


class _Stored(Sequence[EventRecord]):
    """The events a commit stored, as records built on access from their fields in the run's
    history (a flat list that only ever grows: the fields stay where they are). ``start`` and
    ``stop`` count events, not fields."""

    __slots__ = ("_rows", "_start", "_stop")

    def __init__(self, rows: Sequence[Any], start: int, stop: int) -> None:
        self._rows = rows
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> EventRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[EventRecord]: ...

    def __getitem__(self, index: int | slice) -> EventRecord | list[EventRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = self._stop - self._start
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("event index out of range")
        i = self._start + index
        at = i * _EVENT_FIELDS
        kind, run_id, when, placement, attempt, token_id, data = self._rows[at : at + _EVENT_FIELDS]
        if type(data) is not dict:
            data = _unpack(data)
        return EventRecord(kind, run_id, when, placement, attempt, token_id, data, i + 1)

    def __repr__(self) -> str:
        return repr(list(self))


def _add_id(index: dict[str, str | tuple[str, ...]], name: str, new: str) -> None:
    """Index ``new`` under ``name``: the id alone first, a tuple from the second on (no tuple
    for the collector to meet for the many runs that park once)."""
    had = index.get(name)
    if had is None:
        index[name] = new
    else:
        index[name] = (had, new) if type(had) is str else (*had, new)


_DueItem = tuple[datetime, int, str, str, str]
"""A due entry in the heap: (when, seq, run id, token id, purpose)."""

_DICT = "\x00flowtide:dict"
"""The first item of a frozen mapping (:func:`_freeze`)."""
_LIST = "\x00flowtide:list"
"""The first item of a frozen list (:func:`_freeze`)."""
_EMPTY: dict[type, tuple[str]] = {dict: (_DICT,), list: (_LIST,)}

_PARKED_RUN = "parked"
_ENDED_RUN = frozenset({"completed", "failed", "cancelled", "timed_out"})
_COMPACTED_EVENTS = 64
"""The longest history :func:`_compacted` packs."""
_EVENT_FIELDS = 7
"""kind, run id, at, placement, attempt, token id, data (the seq is the position)."""
_CONTAINERS = (dict, list)
_PACKED_PAYLOADS = (dict, list, bytes)
"""A park's payload of these types is packed (bytes too: a stored bytes value means packed)."""
_ATOMS = frozenset({str, int, float, bool, type(None)})
"""Immutable values that :meth:`MemoryStore.get_state` need not copy."""
_STATUSES = {s.value: s for s in TokenStatus}
_PARK_STATUSES = {s.value: s for s in ParkStatus}
_OPEN = ParkStatus.PARKED.value
_LIVE = frozenset(s.value for s in LIVE_TOKEN_STATUSES)
_LIFECYCLE = 3
_STATUS = 3
_DEADLINE = 7
_EPOCH = 11
_PARK_STATUS = 10


def _pack(value: Any) -> Any:
    """``value`` (a dict, a list) as the store keeps it: pickled bytes, which the collector never
    tracks, or, if pickle refuses it (a lambda, a lock, an object of a local class), frozen by
    :func:`_freeze`. Bytes also keep the row or history tuple that holds them from being tracked
    past its first collection: a frozen value nests tuples, and the collector untracks those one
    level per collection, so each one (and the row holding it) used to be moved to the older
    generations, whose collections then came sooner and took longer."""
    try:
        return _dumps(value, PROTOCOL)  # (flowtide.packing.pack, inline: it is on every park)
    except Exception:
        return _freeze(value)


def _unpack(value: Any) -> Any:
    """The value :func:`_pack` was given (new dicts and lists); anything else as it is."""
    t = type(value)
    if t is bytes:
        return unpack(value)
    if t is tuple:
        return _thaw(value)
    return value


_dumps = pickle.dumps


def _freeze(value: Any) -> Any:
    """A value without dicts or lists, which the collector can stop tracking: a dict becomes
    ``(_DICT, key, value, key, value, ...)``, a list ``(_LIST, item, ...)``, anything else is
    kept as it is. What :func:`_pack` falls back on."""
    t = type(value)
    if t is dict:
        out: list[Any] = [_DICT]
        for k, v in value.items():
            tv = type(v)
            if tv is dict or tv is list:
                # Empty ones (a result's errors, warnings, state) are shared constants.
                out += (k, _freeze(v) if v else _EMPTY[tv])
            else:
                out += (k, v)  # most values are plain: no call for them
        return tuple(out)
    if t is list:
        return (_LIST, *[_freeze(v) if type(v) in _CONTAINERS else v for v in value])
    return value


def _thaw(value: Any) -> Any:
    """The value :func:`_freeze` was given (new dicts and lists)."""
    if type(value) is not tuple or not value:
        return value
    tag = value[0]
    if tag is _DICT:
        out: dict[Any, Any] = {}
        for i in range(1, len(value), 2):
            v = value[i + 1]
            out[value[i]] = _thaw(v) if type(v) is tuple else v
        return out
    if tag is _LIST:
        return [_thaw(v) if type(v) is tuple else v for v in value[1:]]
    return value


def _packed_data(data: dict[str, Any]) -> Any:
    """An event's data as the history keeps it from a general commit: packed if it holds a dict
    or a list, else the engine's own dict (a dict of plain values is not tracked anyway)."""
    for v in data.values():
        if type(v) in _CONTAINERS:
            return _pack(data)
    return data


def _compacted(history: list[Any]) -> list[Any] | tuple[Any, ...]:
    """A parked run's history as the store keeps it until its next event (and a run's that
    parked and then ended at once, by a signal or a deadline): a full collection walks every
    item of a list, and of a tuple holding a dict, but stops tracking a tuple of plain values.
    So a short history becomes a tuple with its events' data packed, and the many runs that wait
    (or waited) cost the collector nothing. A long one stays as it is, and so does the history
    of a run that ends without having waited just before: packing it at its end would cost
    short flows 10-17 % (a 10- or 30-node chain), for a store that keeps everything anyway."""
    if len(history) > _COMPACTED_EVENTS * _EVENT_FIELDS:
        return history
    for i in range(_EVENT_FIELDS - 1, len(history), _EVENT_FIELDS):
        data = history[i]
        if type(data) is dict:
            history[i] = _pack(data)
    return tuple(history)


def _copied(state: dict[str, Any] | bytes) -> dict[str, Any]:
    if isinstance(state, bytes):
        copied: dict[str, Any] = unpack(state)  # (new objects throughout)
        return copied
    if _ATOMS.issuperset(map(type, state.values())):
        return dict(state)  # nothing mutable to copy (most states of parked runs)
    copied = deep_copy(state)
    return copied


def _settled_state(state: dict[str, Any] | bytes) -> dict[str, Any] | bytes:
    """The state of a run that parks, or ends after waiting, as the store keeps it until its
    next write: packed when it holds containers. A dict of plain values is not tracked by the
    collector; one that holds containers is, and so are they, until the run's next write: for a
    run that waits, that is a survivor per container into the oldest generation, which each full
    collection then walks for as long as the run waits. Kept as it is when pickle refuses it."""
    if type(state) is not dict or _ATOMS.issuperset(map(type, state.values())):
        return state
    return pack(state) or state


_TokenRows = tuple[Any, ...] | dict[str, tuple[Any, ...]]
"""A run's token rows as :attr:`MemoryStore._tokens` keeps them: one row, or rows by token id."""


def _put_token(
    tokens: dict[str, _TokenRows], run_id: str, mine: _TokenRows | None, row: tuple[Any, ...]
) -> None:
    """Store ``row`` (a token of ``run_id``, whose rows were ``mine``) in ``tokens``."""
    if mine is None or (isinstance(mine, tuple) and mine[0] == row[0]):
        tokens[run_id] = row
    elif isinstance(mine, tuple):
        tokens[run_id] = {mine[0]: mine, row[0]: row}  # a second token: a dict from now on
    else:
        mine[row[0]] = row


def _rows(mine: _TokenRows | None) -> Iterable[tuple[Any, ...]]:
    """A run's token rows, in the order they were first written."""
    if mine is None:
        return ()
    if isinstance(mine, tuple):
        return (mine,)
    return mine.values()


def _row_of(mine: _TokenRows | None, token_id: str) -> tuple[Any, ...] | None:
    """The row of ``token_id`` among a run's token rows, or None."""
    if mine is None:
        return None
    if isinstance(mine, tuple):
        return mine if mine[0] == token_id else None
    return mine.get(token_id)


def _token_row(t: TokenRecord) -> tuple[Any, ...]:
    return (
        t.id,
        t.run_id,
        t.placement,
        t.status._value_,
        t.attempt,
        t.visit,
        t.lineage,
        t.deadline,
        t.due,
        t.created_at,
        _pack(t.data) if t.data else None,
        t.epoch,
    )


def _token_record(r: tuple[Any, ...]) -> TokenRecord:
    return TokenRecord(
        r[0],
        r[1],
        r[2],
        _STATUSES[r[3]],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        r[9],
        _unpack(r[10]) if r[10] is not None else {},
        r[11],
    )


def _run_row(r: RunRecord) -> tuple[Any, ...]:
    return (
        r.id,
        r.flow_id,
        r.flow_version,
        r.lifecycle,
        r.created_at,
        r.deadline,
        r.started_at,
        r.finished_at,
        r.parent_run_id,
        r.parent_token_id,
        r.depth,
        r.outcome,
        _pack(r.result) if r.result else r.result,
        _NO_ENTRYPOINT if r.options == _NO_ENTRYPOINT_DATA else _pack(r.options),
        _pack(r.resume) if r.resume is not None else None,
    )


_NO_ENTRYPOINT_DATA: dict[str, Any] = {"entrypoint": None}
_NO_ENTRYPOINT = _pack(_NO_ENTRYPOINT_DATA)
"""The options of most runs (started at the flow's default entrypoint), packed once: a
comparison costs less than packing them again on every run row."""


def _run_record(r: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
        _unpack(r[12]) if r[12] else r[12],
        {"entrypoint": None} if r[13] is _NO_ENTRYPOINT else _unpack(r[13]),
        _unpack(r[14]) if r[14] is not None else None,
    )


def _park_row(p: ParkRecord) -> tuple[Any, ...]:
    return (
        p.id,
        p.run_id,
        p.token_id,
        p.placement,
        p.visit,
        p.epoch,
        p.parked_at,
        p.deadline,
        p.key,
        _pack(p.payload) if type(p.payload) in _PACKED_PAYLOADS else p.payload,
        p.status._value_,
        p.closed_at,
        p.closed_by,
    )


def _park_record(r: tuple[Any, ...]) -> ParkRecord:
    return ParkRecord(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        _unpack(r[9]),
        _PARK_STATUSES[r[10]],
        r[11],
        r[12],
    )
