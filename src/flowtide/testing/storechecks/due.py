"""Checks of due entries: one per token and purpose, read per run, removed by the step that
fires them."""

from __future__ import annotations

from collections.abc import Iterable

from flowtide.store.base import Commit, DueEntry, Store
from flowtide.testing.storechecks.support import at, new_run, same


def _names(entries: Iterable[DueEntry]) -> list[tuple[str, str]]:
    return [(e.token_id, e.purpose) for e in entries]


async def due_entries_are_read_earliest_first(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    same(list(await store.due_of("r")), [], "due_of a run without entries")
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
    same(
        list(await store.due_of("r")),
        [DueEntry(at(10), "r", "r.2"), DueEntry(at(30), "r", "r.1")],
        "the entries of run r (earliest first)",
    )
    same(
        _names(await store.due_of("s")),
        [("s.1", "timeout"), ("s.1", "timer:1:0"), ("s.3", "b"), ("s.2", "a")],
        "the entries of run s (ties in the order set)",
    )


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
    same(
        list(await store.due_of("r")),
        [
            DueEntry(at(5), "r", "r.1", "timer:1:0"),
            DueEntry(at(20), "r", "r.1", "timeout"),
            DueEntry(at(31), "r", "r.3", "x"),
        ],
        "the entries left after replacing, dropping and clearing",
    )


async def fired_entries_are_removed_only_as_they_were(store: Store) -> None:
    """``Commit.due_fired`` removes an entry still stored for the instant it fired at; one set
    again since (for another instant) stays, and so does every other entry."""
    await new_run(store)
    await store.commit(
        Commit(
            "r",
            due=[
                DueEntry(at(10), "r", "r.1", "timeout"),
                DueEntry(at(10), "r", "r.2", "timeout"),
                DueEntry(at(12), "r", "r.2"),
            ],
        )
    )
    await store.commit(Commit("r", due=[DueEntry(at(40), "r", "r.2", "timeout")]))
    await store.commit(
        Commit(
            "r",
            due_fired=[
                DueEntry(at(10), "r", "r.1", "timeout"),
                DueEntry(at(10), "r", "r.2", "timeout"),
                DueEntry(at(10), "r", "r.7", "timeout"),
            ],
        )
    )
    same(
        list(await store.due_of("r")),
        [DueEntry(at(12), "r", "r.2"), DueEntry(at(40), "r", "r.2", "timeout")],
        "the entries left after firing",
    )
    # Fired and set again in one commit: the new instant is kept.
    await store.commit(
        Commit(
            "r",
            due_fired=[DueEntry(at(12), "r", "r.2")],
            due=[DueEntry(at(50), "r", "r.2")],
        )
    )
    same(
        _names(await store.due_of("r")),
        [("r.2", "timeout"), ("r.2", "")],
        "the entries after a fire that set its token's entry again",
    )


async def an_ended_run_keeps_no_due_entries(store: Store) -> None:
    run = await new_run(store)
    await store.commit(Commit("r", due=[DueEntry(at(10), "r", "r.1", "timeout")]))
    run.lifecycle = "completed"
    await store.commit(Commit("r", run=run, due=[DueEntry(at(20), "r", "r.2")]))
    same(list(await store.due_of("r")), [], "the due entries of a run that ended")
    same(await store.next_wake(), None, "the wake instant of a run that ended")


async def a_commit_wakes_another_run(store: Store) -> None:
    """``Commit.wakes`` sets a due entry on another run in the commit's transaction (a child's
    end wakes its parent), bringing that run's wake instant up to date; a run that has ended
    gets none."""
    await new_run(store, "parent", lifecycle="parked")
    await new_run(store, "child", lifecycle="parked")
    await new_run(store, "gone", lifecycle="completed")
    same(await store.next_wake(), None, "the wake instant before the wake (nothing due)")
    await store.commit(
        Commit(
            "child",
            due=[DueEntry(at(50), "child", "child.1")],
            wakes=[
                DueEntry(at(10), "parent", "parent.1", "child_ended"),
                DueEntry(at(10), "gone", "gone.1", "child_ended"),
            ],
        )
    )
    same(
        list(await store.due_of("parent")),
        [DueEntry(at(10), "parent", "parent.1", "child_ended")],
        "the entry the commit set on the other run",
    )
    same(list(await store.due_of("gone")), [], "the entries of an ended run woken")
    same(await store.next_wake(), at(10), "the wake instant of the run woken")
    same(_names(await store.due_of("child")), [("child.1", "")], "the commit's own entries")
