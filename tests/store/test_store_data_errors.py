"""A value a store refuses (a key longer than PostgreSQL can index, a NUL in its text) is a
``StoreDataError``: the data is at fault, so the engine does not try the same write again as if
the store were down, and nothing of the commit is applied."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from flowtide.clock import VirtualClock
from flowtide.engine.run._commit import commit_step
from flowtide.store import Commit, EventRecord, MemoryStore, ParkRecord, StoreDataError
from flowtide.testing import StoreFactory
from flowtide.testing.storechecks.support import new_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def park(key: str) -> ParkRecord:
    return ParkRecord("r.1#1", "r", "r.1", "p1", 1, 1, T0, key=key)


LONG = "".join(random.Random(7).choices(string.ascii_letters, k=4_000))
"""A key longer than an index entry may be (and that does not compress)."""


@pytest.mark.parametrize("key", [LONG, "a\x00b"], ids=["long", "nul"])
async def test_postgres_refuses_a_key_it_cannot_keep_as_a_data_error(
    postgres_stores: StoreFactory, key: str
) -> None:
    async with postgres_stores() as store:
        await new_run(store)
        with pytest.raises(StoreDataError, match="refused a value"):
            await store.commit(Commit("r", parks=[park(key)], state={"n": 2}))
        assert await store.parks(run_id="r") == []
        assert await store.get_state("r") == {"n": 1}


class Refusing(MemoryStore):
    """A store that refuses every commit's data."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        self.tries += 1
        raise StoreDataError("a value refused")


async def test_a_data_error_is_not_tried_again() -> None:
    store = Refusing()
    clock = VirtualClock(T0)
    with pytest.raises(StoreDataError):
        await commit_step(store, Commit("r"), clock)
    assert store.tries == 1 and clock.now() == T0
    await clock.aclose()
