"""Checks of due entries: claimed earliest first and once, one per token and purpose."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from flowtide.store.base import Commit, DueEntry, Store
from flowtide.testing.storechecks.support import at, new_run, same


def _names(entries: Iterable[DueEntry]) -> list[tuple[str, str]]:
    return [(e.token_id, e.purpose) for e in entries]


async def due_entries_are_claimed_earliest_first(store: Store) -> None:
    same(await store.next_due(), None, "next_due of an empty store")
    same(list(await store.claim_due(at(1000))), [], "claim_due of an empty store")
    await new_run(store)
    await new_run(store, "s")
    await store.commit(
        Commit("r", due=[DueEntry(at(30), "r", "r.1"), DueEntry(at(10), "r", "r.2")])
    )
    await store.commit(
        Commit(
            "s",
            due=[
                DueEntry(at(20), "s", "s.1", "timeout"),
                DueEntry(at(20), "s", "s.1", "timer:1:0"),
                DueEntry(at(99), "s", "s.3", "b"),
                DueEntry(at(99), "s", "s.2", "a"),
            ],
        )
    )
    same(await store.next_due(), at(10), "next_due")
    same(list(await store.claim_due(at(9))), [], "claim_due before the first instant")
    first = await store.claim_due(at(30), limit=2)
    same(
        list(first),
        [DueEntry(at(10), "r", "r.2"), DueEntry(at(20), "s", "s.1", "timeout")],
        "the first claim (earliest first, ties in the order set, up to the limit)",
    )
    same(await store.next_due(), at(20), "next_due after a claim")
    second = await store.claim_due(at(30))
    same(_names(second), [("s.1", "timer:1:0"), ("r.1", "")], "the second claim")
    same(list(await store.claim_due(at(30))), [], "a claim of entries claimed already")
    same(await store.next_due(), at(99), "next_due of the last entry")
    same(
        _names(await store.claim_due(at(99))),
        [("s.3", "b"), ("s.2", "a")],
        "a claim at the entries' instant (ties in the order set)",
    )
    same(await store.next_due(), None, "next_due once every entry was claimed")


async def due_entries_are_claimed_once(store: Store) -> None:
    """Claims that overlap (two sweepers) share the entries out: none is claimed twice."""
    await new_run(store)
    entries = [DueEntry(at(i % 7), "r", f"r.{i}") for i in range(40)]
    await store.commit(Commit("r", due=entries))
    claims = await asyncio.gather(*(store.claim_due(at(10), limit=15) for _ in range(4)))
    claimed = [e for claim in claims for e in claim]
    same(len(claimed), 40, "entries claimed by four overlapping claims")
    same(len(set(claimed)), 40, "distinct entries among them")
    same(await store.next_due(), None, "next_due once every entry was claimed")


async def due_entries_are_one_per_token_and_purpose(store: Store) -> None:
    await new_run(store)
    await store.commit(
        Commit(
            "r",
            due=[
                DueEntry(at(10), "r", "r.1", "timeout"),
                DueEntry(at(5), "r", "r.1", "timer:1:0"),
                DueEntry(at(7), "r", "r.1", "timer:1:1"),
                DueEntry(at(8), "r", "r.2"),
                DueEntry(at(9), "r", "r.3"),
            ],
        )
    )
    # A new entry of a token and purpose replaces the old one.
    await store.commit(Commit("r", due=[DueEntry(at(20), "r", "r.1", "timeout")]))
    # Dropped by purpose, cleared by token; both before the commit's own entries are set.
    await store.commit(Commit("r", due_dropped=[("r.1", "timer:1:1"), ("r.9", "absent")]))
    await store.commit(
        Commit("r", due_cleared=["r.2", "r.3", "r.9"], due=[DueEntry(at(30), "r", "r.3", "x")])
    )
    await store.commit(
        Commit("r", due_dropped=[("r.3", "x")], due=[DueEntry(at(31), "r", "r.3", "x")])
    )
    same(await store.next_due(), at(5), "next_due")
    same(
        list(await store.claim_due(at(1000))),
        [
            DueEntry(at(5), "r", "r.1", "timer:1:0"),
            DueEntry(at(20), "r", "r.1", "timeout"),
            DueEntry(at(31), "r", "r.3", "x"),
        ],
        "the entries left after replacing, dropping and clearing",
    )
