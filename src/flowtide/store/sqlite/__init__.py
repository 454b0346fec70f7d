"""The SQLite store: Flowtide's embedded default (:class:`SQLiteStore`)."""

from flowtide.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
