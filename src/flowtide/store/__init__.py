"""Where runs live: the store interface, JSON values, the in-memory and SQLite stores (the
PostgreSQL store is ``flowtide.store.postgres``, with the ``postgres`` extra), and stores named
by URL (:func:`open_store`)."""

from flowtide.store.base import (
    LIVE_TOKEN_STATUSES,
    Checkpoint,
    Commit,
    DueEntry,
    DuplicateSignal,
    EventRecord,
    Expect,
    Lease,
    LeaseLost,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    Store,
    StoreConflict,
    StoredFlow,
    StoreError,
    StoreOpenError,
    StoreSchemaError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
    UnknownStoredFlow,
)
from flowtide.store.jsonvalues import NotJSONError, check_json
from flowtide.store.memory import MemoryStore
from flowtide.store.sqlite import SQLiteStore
from flowtide.store.urls import open_store, redact

__all__ = [
    "LIVE_TOKEN_STATUSES",
    "Checkpoint",
    "Commit",
    "DueEntry",
    "DuplicateSignal",
    "EventRecord",
    "Expect",
    "Lease",
    "LeaseLost",
    "MemoryStore",
    "NodeAnchor",
    "NotJSONError",
    "ParkRecord",
    "ParkStatus",
    "RunRecord",
    "SQLiteStore",
    "ScatterItemRecord",
    "SignalAnswer",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreOpenError",
    "StoreSchemaError",
    "StoredFlow",
    "TokenRecord",
    "TokenStatus",
    "UnknownRunError",
    "UnknownStoredFlow",
    "check_json",
    "open_store",
    "redact",
]
