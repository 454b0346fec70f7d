"""Due entries indexed by instant, for a store kept in memory: :class:`DueIndex`."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from datetime import datetime

from flowtide.store.base import DueEntry

__all__ = ["DueIndex"]


@dataclass(frozen=True, order=True, slots=True)
class _Item:
    when: datetime
    order: int
    """When it was set, among every entry: ties of one instant are claimed in this order."""
    entry: DueEntry = field(compare=False)


class DueIndex:
    """At most one due entry per (token, purpose), claimed earliest first (entries of one
    instant in the order they were set).

    A heap ordered by (instant, order set) finds the earliest entry whatever the number of
    entries, as a database's index on the instant does. A replaced or dropped entry is not
    searched for in the heap: it stays there, no longer live, until it reaches the top and is
    skipped, or until stale items outnumber live ones and the heap is rebuilt.
    """

    def __init__(self) -> None:
        self._live: dict[str, dict[str, _Item]] = {}
        """token id -> purpose -> its live item."""
        self._count = 0
        """How many items ``_live`` holds."""
        self._heap: list[_Item] = []
        self._order = itertools.count()

    def set(self, entry: DueEntry) -> None:
        """Set ``entry``, replacing the token's entry of the same purpose."""
        item = _Item(entry.when, next(self._order), entry)
        purposes = self._live.setdefault(entry.token_id, {})
        if entry.purpose not in purposes:
            self._count += 1
        purposes[entry.purpose] = item
        heapq.heappush(self._heap, item)
        if len(self._heap) > 2 * self._count + 64:
            self._heap = sorted(i for p in self._live.values() for i in p.values())

    def drop(self, token_id: str, purpose: str) -> None:
        """Drop the token's entry of ``purpose``, if it has one."""
        purposes = self._live.get(token_id)
        if purposes is not None and purposes.pop(purpose, None) is not None:
            self._count -= 1
            if not purposes:
                del self._live[token_id]

    def clear(self, token_id: str) -> None:
        """Drop every entry of the token."""
        self._count -= len(self._live.pop(token_id, {}))

    def next_due(self) -> datetime | None:
        self._skip_stale()
        return self._heap[0].when if self._heap else None

    def claim(self, now: datetime, limit: int) -> list[DueEntry]:
        """Remove and return up to ``limit`` entries due at ``now``, earliest first."""
        claimed: list[DueEntry] = []
        while len(claimed) < limit:
            self._skip_stale()
            if not self._heap or self._heap[0].when > now:
                break
            entry = heapq.heappop(self._heap).entry
            self.drop(entry.token_id, entry.purpose)
            claimed.append(entry)
        return claimed

    def entries(self) -> list[DueEntry]:
        """Every entry, in the order they would be claimed."""
        return [i.entry for i in sorted(i for p in self._live.values() for i in p.values())]

    def _skip_stale(self) -> None:
        heap = self._heap
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)

    def _is_live(self, item: _Item) -> bool:
        return self._live.get(item.entry.token_id, {}).get(item.entry.purpose) is item
