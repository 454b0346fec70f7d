"""The store conformance suite: the memory store passes every check, and broken stores fail
the checks meant to catch them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from flowtide.store import Commit, DueEntry, EventRecord, MemoryStore, Store
from flowtide.testing import (
    StoreCheck,
    StoreCheckFailed,
    StoreFactory,
    check_store,
    run_store_check,
    store_checks,
)


def factory(kind: Callable[[], Store]) -> StoreFactory:
    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Store]:
        yield kind()

    return fresh


CHECKS = store_checks()


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
async def test_the_memory_store_passes(name: str, check: StoreCheck) -> None:
    await run_store_check(factory(MemoryStore), check)


async def test_check_store_runs_every_check_on_a_fresh_store() -> None:
    made: list[Store] = []

    def counted() -> Store:
        made.append(MemoryStore())
        return made[-1]

    await check_store(factory(counted))
    assert len(made) == len(CHECKS) == len({id(s) for s in made})
    assert len({name for name, _ in CHECKS}) == len(CHECKS)


# -- broken stores ------------


class PartialCommits(MemoryStore):
    """Applies a commit's tokens and state first, then the rest: not all or nothing."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        first = Commit(
            commit.run_id,
            tokens=commit.tokens,
            state=commit.state,
            state_deleted=commit.state_deleted,
        )
        await super().commit(first)
        rest = replace(commit, tokens=(), state=None, state_deleted=())
        return await super().commit(rest)


class IgnoringExpect(MemoryStore):
    """Applies every commit, whatever its expectations."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, expect={}))


class IgnoringTheRunsLifecycle(MemoryStore):
    """Applies a commit whatever lifecycle its run is in."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, run_lifecycles=None))


class ClaimingWithoutRemoving(MemoryStore):
    """Returns due entries without removing them: each may be fired again and again."""

    async def claim_due(self, now: datetime, limit: int = 100) -> Sequence[DueEntry]:
        return [e for e in self.due_entries() if e.when <= now][:limit]


class SharingState(MemoryStore):
    """Keeps each run's state decoded once read, and gives every reader that very dict."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded: dict[str, dict[str, Any]] = {}

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        events = await super().commit(commit)
        self.decoded.pop(commit.run_id, None)
        return events

    async def get_state(self, run_id: str) -> dict[str, Any]:
        if run_id not in self.decoded:
            self.decoded[run_id] = await super().get_state(run_id)
        return self.decoded[run_id]


@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        (PartialCommits, "a_refused_commit_applies_nothing"),
        (IgnoringExpect, "compare_and_set_conflicts"),
        (IgnoringExpect, "a_refused_commit_applies_nothing"),
        (IgnoringTheRunsLifecycle, "run_lifecycle_conflicts"),
        (ClaimingWithoutRemoving, "due_entries_are_claimed_earliest_first"),
        (ClaimingWithoutRemoving, "due_entries_are_claimed_once"),
        (SharingState, "records_are_copies"),
    ],
)
async def test_a_broken_store_fails_the_check_meant_to_catch_it(
    broken: Callable[[], Store], caught_by: str
) -> None:
    with pytest.raises(StoreCheckFailed) as failed:
        await check_store(factory(broken))
    failures = dict(failed.value.failures)
    assert caught_by in failures
    assert f"  {caught_by}: {failures[caught_by]}" in str(failed.value)
    check = dict(CHECKS)[caught_by]
    with pytest.raises(AssertionError):
        await run_store_check(factory(broken), check)


async def test_a_check_that_crashes_is_reported_with_the_error() -> None:
    class Crashing(MemoryStore):
        async def next_due(self) -> datetime | None:
            raise RuntimeError("the index is gone")

    with pytest.raises(StoreCheckFailed) as failed:
        await check_store(factory(Crashing))
    failures = dict(failed.value.failures)
    assert failures["due_entries_are_claimed_earliest_first"] == ("RuntimeError: the index is gone")
    assert isinstance(failed.value, AssertionError)
