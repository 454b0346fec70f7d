"""The behavioural suite every store must pass: :func:`check_store`.

``make_store`` is a function that returns an async context manager giving a fresh, empty store
(and cleaning it up on exit: closing connections, dropping a schema). For the memory store::

    @contextlib.asynccontextmanager
    async def memory_store() -> AsyncIterator[Store]:
        yield MemoryStore()

    await check_store(memory_store)

Under pytest, one test per check::

    @pytest.mark.parametrize(("name", "check"), store_checks(), ids=[n for n, _ in store_checks()])
    async def test_store(name: str, check: StoreCheck) -> None:
        await run_store_check(memory_store, check)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from flowtide.store.base import Store
from flowtide.testing.storechecks import CHECKS, StoreCheck

__all__ = [
    "StoreCheck",
    "StoreCheckFailed",
    "StoreFactory",
    "check_store",
    "run_store_check",
    "store_checks",
]

StoreFactory = Callable[[], AbstractAsyncContextManager[Store]]
"""Gives a fresh, empty store for each check, as an async context manager."""


class StoreCheckFailed(AssertionError):
    """Checks of :func:`check_store` failed; ``failures`` holds (check name, why) pairs."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = tuple(failures)
        lines = [f"{len(self.failures)} store check(s) failed:"]
        lines += [f"  {name}: {why}" for name, why in self.failures]
        super().__init__("\n".join(lines))


def store_checks() -> list[tuple[str, StoreCheck]]:
    """Every check, as (name, check) pairs, in the order :func:`check_store` runs them."""
    return [(check.__name__, check) for check in CHECKS]


async def run_store_check(make_store: StoreFactory, check: StoreCheck) -> None:
    """Run one check on a fresh store (raises what the check raises)."""
    async with make_store() as store:
        await check(store)


async def check_store(make_store: StoreFactory) -> None:
    """Run every check, each on a fresh store from ``make_store``; raise
    :class:`StoreCheckFailed` naming every check that failed, and why, if any did."""
    failures: list[tuple[str, str]] = []
    for name, check in store_checks():
        try:
            await run_store_check(make_store, check)
        except AssertionError as error:
            failures.append((name, str(error)))
        except Exception as error:  # a crash is a failure of the check, reported with the rest
            failures.append((name, f"{type(error).__name__}: {error}"))
    if failures:
        raise StoreCheckFailed(failures)
