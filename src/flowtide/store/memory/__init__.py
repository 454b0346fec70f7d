"""An in-memory store: for tests and throwaway runs (see :mod:`flowtide.store.memory.store`)."""

from flowtide.store.memory.store import MemoryStore

__all__ = ["MemoryStore"]
