"""The server tests run on the memory, SQLite and PostgreSQL stores where they use
``every_store``."""

from tests.engine.conftest import every_store

__all__ = ["every_store"]
