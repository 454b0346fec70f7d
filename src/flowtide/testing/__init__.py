"""Tools for testing with Flowtide: the conformance suite a store must pass."""

from flowtide.testing.storesuite import (
    StoreCheck,
    StoreCheckFailed,
    StoreFactory,
    check_store,
    run_store_check,
    store_checks,
)

__all__ = [
    "StoreCheck",
    "StoreCheckFailed",
    "StoreFactory",
    "check_store",
    "run_store_check",
    "store_checks",
]
