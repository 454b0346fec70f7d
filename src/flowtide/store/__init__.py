"""Where runs live: the store interface and the in-memory store."""

from flowtide.store.base import (
    Commit,
    DueEntry,
    EventRecord,
    NodeAnchor,
    RunRecord,
    ScatterItemRecord,
    Store,
    StoreConflict,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
)
from flowtide.store.memory import MemoryStore

__all__ = [
    "Commit",
    "DueEntry",
    "EventRecord",
    "MemoryStore",
    "NodeAnchor",
    "RunRecord",
    "ScatterItemRecord",
    "Store",
    "StoreConflict",
    "StoreError",
    "TokenRecord",
    "TokenStatus",
    "UnknownRunError",
]
