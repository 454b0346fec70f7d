"""Where runs live: the store interface and the in-memory store."""

from flowtide.store.base import (
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
)
from flowtide.store.memory import MemoryStore

__all__ = [
    "Commit",
    "DueEntry",
    "DuplicateSignal",
    "EventRecord",
    "Expect",
    "MemoryStore",
    "NodeAnchor",
    "ParkRecord",
    "ParkStatus",
    "RunRecord",
    "ScatterItemRecord",
    "SignalAnswer",
    "Store",
    "StoreConflict",
    "StoreError",
    "TokenRecord",
    "TokenStatus",
    "UnknownRunError",
]
